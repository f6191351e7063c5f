#!/usr/bin/env python3
"""Runs every PromQL query of the given dashboards against a real Prometheus
scraping iowarden in the guest: the panels the host (no NVMe, no iocost)
can only skip. Prints "OK panel ..." / "BAD panel ..." lines.
usage: promql.py SCRATCH TARGET DASHBOARD.json..."""
import json, os, re, subprocess, sys, time, urllib.parse, urllib.request

scratch, target, dashboards = sys.argv[1], sys.argv[2], sys.argv[3:]
port = 19090
cfg = f"{scratch}/prometheus.yml"
open(cfg, "w").write(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: iowarden
    static_configs: [{{targets: ['{target}']}}]
""")
tsdb = f"{scratch}/tsdb-{os.getpid()}"
prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tsdb}",
                         f"--web.listen-address=127.0.0.1:{port}"],
                        stdout=subprocess.DEVNULL, stderr=open(f"{scratch}/prometheus.log", "w"))

def query(expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    return json.load(urllib.request.urlopen(url, timeout=10))

try:
    # Every rate() and increase() below needs two samples in its window:
    # wait for three successful scrapes in the shortest one (10 s), counted
    # by Prometheus itself rather than timed (a scrape here can be late).
    for _ in range(240):
        try:
            r = query('sum_over_time(up{job="iowarden"}[10s]) >= 3 and up{job="iowarden"} == 1')
            if r["data"]["result"]:
                break
        except Exception:
            pass
        time.sleep(0.5)
    # Grafana's variables with "All" selected; $__rate_interval is 4x the
    # scrape interval (slack for this slow emulated guest).
    vars_ = {"__rate_interval": "10s", "__range": "1m", "__interval": "1s"}
    def subst(e):
        e = re.sub(r"\$\{?(__rate_interval|__range|__interval)\}?", lambda m: vars_[m.group(1)], e)
        return re.sub(r"\$\{?(\w+)\}?", ".*", e)
    def walk(ps):
        for p in ps:
            yield p
            yield from walk(p.get("panels", []))
    for path in dashboards:
        d = json.load(open(path))
        for v in d["templating"]["list"]:
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            m = re.match(r"label_values\((.*),\s*(\w+)\)$", q or "")
            if m:
                r = query(subst(m.group(1)))["data"]["result"]
                ok = any(m.group(2) in x["metric"] for x in r)
                print("OK " if ok else "BAD", f"variable {d['title']} / ${v['name']}")
        for p in walk(d["panels"]):
            for t in p.get("targets", []):
                e = subst(t["expr"])
                r = query(e)
                ok = r["status"] == "success" and len(r["data"]["result"]) > 0
                print("OK " if ok else "BAD", f"panel {d['title']} / {p['title']}: {len(r['data']['result'])} series" + ("" if ok else f" from {e}"))
finally:
    prom.terminate()
    try:
        prom.wait(timeout=30)
    except subprocess.TimeoutExpired:  # never left to hang the script that runs it
        prom.kill()
        prom.wait()
    subprocess.run(["rm", "-rf", tsdb])

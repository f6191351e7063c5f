#!/usr/bin/env python3
"""Generates iowarden's Grafana dashboards (dashboards/*.json).

One generator keeps the five dashboards consistent: the same `$datasource`
variable on every panel and query, the same `$instance`/`$device`/`$cgroup`
filters, stable uids and panel ids. The dashboards are defined here; the
panel kinds, their defaults and the query helpers they share are in
panels.py. Edit either, run `make dashboards`, commit the scripts and the
JSON together. `make test` runs this script with `--check` (the committed
JSON must be what it generates) and then executes every panel query against
a real Prometheus scraping iowarden (loader/tests/dashboards.rs).

Built with Grafana's dashboards-as-code SDK (grafana-foundation-sdk, the
version pinned in scripts/install-deps.sh, which installs it into the tools
venv that `make dashboards` and the test run this script with): typed
builders for the dashboard, each panel kind and the Prometheus queries.
"""

import json
import sys
from pathlib import Path

# panels.py is found next to this script (its directory is sys.path[0]); no
# bytecode, so that a run leaves no __pycache__ in dashboards/.
sys.dont_write_bytecode = True
# First: panels.py imports the SDK and exits saying how to install it if it is missing.
from panels import RATE, STAGES_FLAG, Dashboard, heatmap_query, latency_quantile, needs, query_var, sel, target
from grafana_foundation_sdk.cog.encoder import JSONEncoder

HERE = Path(__file__).resolve().parent

INSTANCE = query_var("instance", "Node", "label_values(iowarden_build_info, instance)")


# --- 1. Noisy neighbour ------------------------------------------------------

def p99(stage, selector):
    """p99 latency of a stage per (instance, device, cgroup) over the cgroups a selector picks."""
    return latency_quantile(0.99, "instance, device, cgroup", f"{selector[1:-1]}, stage=\"{stage}\"")


def held_by_limits(selector):
    """Time the cgroup's own limits held its requests before they existed,
    per (instance, device, cgroup): the throttle stage's sum where exported
    (--io-counters ...,throttle: io.max, iocost, io.latency, wbt), else
    io.max's hold (a fleet default), else 0."""
    by = "instance, device, cgroup"
    return (f"(sum by ({by}) (rate(iowarden_io_throttle_seconds_total{selector}[{RATE}]))"
            f" or sum by ({by}) (rate(iowarden_io_held_io_max_seconds_total{selector}[{RATE}]))"
            f" or 0 * sum by ({by}) (rate(iowarden_io_requests_total{selector}[{RATE}])))")


def per_request(expr, selector):
    """A per-(instance, device, cgroup) rate divided by the requests completed."""
    return (f"({expr}) / sum by (instance, device, cgroup) "
            f"(rate(iowarden_io_requests_total{selector}[{RATE}]))")


def mean_queue_wait(selector):
    """Mean time in the queue (allocation to issue) per request and cgroup, from
    what the fleet defaults export: total latency's sum (either form; bio
    submission to completion) less the device time and the time its own
    limits held it, over the requests."""
    m = f"{selector[1:-1]}, stage=\"total\""
    by = "instance, device, cgroup"
    total = (f"(sum by ({by}) (rate(iowarden_io_latency_seconds_sum{{{m}}}[{RATE}]))"
             f" or sum by ({by}) (histogram_sum(rate(iowarden_io_latency_seconds{{{m}}}[{RATE}]))))")
    return per_request(f"{total} - sum by ({by}) (rate(iowarden_io_device_seconds_total{selector}[{RATE}]))"
                       f" - {held_by_limits(selector)}", selector)


def noisy_neighbour():
    d = Dashboard(
        "iowarden-noisy-neighbour", "iowarden / Noisy neighbour",
        "Who takes the device and who suffers for it: per-cgroup device-time share, IOPS, "
        "bandwidth and latency from iowarden's BPF histograms.",
        [INSTANCE,
         query_var("device", "Device",
                   'label_values(iowarden_io_requests_total{instance=~"$instance"}, device)'),
         query_var("cgroup", "Cgroup",
                   'label_values(iowarden_io_requests_total{instance=~"$instance", device=~"$device"}, cgroup)')],
        tags=["noisy-neighbour"])
    s = sel(instance="$instance", device="$device", cgroup="$cgroup")
    dev = sel(instance="$instance", device="$device")
    device_share_rows(d, s, dev)
    latency_rows(d, s)
    lock_and_workload_rows(d, s, dev)
    return d


def device_share_rows(d, s, dev):
    """Who takes the device (share of its busy time, who hurts whom) and throughput."""
    # Share of the device's busy time (sum of issue->completion times) per
    # cgroup; the denominator covers every cgroup on the device, not just the
    # selected ones, so shares stay shares of the device.
    share_all = (f"sum by (instance, device, cgroup) (rate(iowarden_io_device_seconds_total{dev}[{RATE}]))"
                 f" / on (instance, device) group_left () "
                 f"sum by (instance, device) (rate(iowarden_io_device_seconds_total{dev}[{RATE}]))")
    share_sel = (f"sum by (instance, device, cgroup) (rate(iowarden_io_device_seconds_total{s}[{RATE}]))"
                 f" / on (instance, device) group_left () "
                 f"sum by (instance, device) (rate(iowarden_io_device_seconds_total{dev}[{RATE}]))")
    top = f"topk by (instance, device) (1, {share_all})"
    culprit = f'label_replace({top}, "culprit", "$1", "cgroup", "(.*)")'

    def victims(expr):
        # Every cgroup on the device but the top consumer, tagged with the culprit's name.
        return (f"({expr} unless on (instance, device, cgroup) {top})"
                f" * on (instance, device) group_left (culprit) (0 * {culprit} + 1)")

    d.row("Who takes the device")
    d.timeseries("Device-time share by cgroup",
                 "Fraction of the device's busy time (sum of issue-to-completion times) spent on each "
                 "cgroup's requests. The cgroup on top is the one the others queue behind.",
                 [target(share_sel, "{{cgroup}} {{device}} {{instance}}")],
                 unit="percentunit", stack=True, max_=1)
    d.bargauge("Current device-time share",
               "Latest device-time share per cgroup: the noisy neighbour is the longest bar.",
               [target(share_sel, "{{cgroup}} {{device}}", instant=True)], unit="percentunit", max_=1)
    measured_culprits(d, dev)
    d.table("Who hurts whom, inferred from device-time shares",
            "Per device, every other cgroup (victim) against the cgroup taking the largest share of device "
            "time (culprit): the victim's mean wait in the queue (total latency less device time, per "
            "request), its p99 in total, its own share, and the culprit's share. A guess where the measured "
            "table above is empty (iowarden run --no-culprits): a victim with a small share and a long queue "
            "wait is likely waiting behind the culprit.",
            [target(victims(mean_queue_wait(dev)), instant=True, fmt="table"),
             target(victims(p99("total", dev)), instant=True, fmt="table"),
             target(victims(share_all), instant=True, fmt="table"),
             target(f"0 * ({p99('total', dev)} unless on (instance, device, cgroup) {top})"
                    f" + on (instance, device) group_left (culprit) {culprit}", instant=True, fmt="table")],
            w=24, h=7,
            rename={"cgroup": "victim", "Value #A": "victim mean queue wait (s)",
                    "Value #B": "victim p99 total (s)", "Value #C": "victim share",
                    "Value #D": "culprit share"})

    d.row("Throughput")
    d.timeseries("IOPS by cgroup", "Completed requests per second, by cgroup and operation.",
                 [target(f"sum by (instance, device, cgroup, op) (rate(iowarden_io_requests_total{s}[{RATE}]))",
                         "{{cgroup}} {{op}} {{device}}")], unit="iops")
    d.timeseries("Bandwidth by cgroup", "Completed bytes per second, by cgroup and operation.",
                 [target(f"sum by (instance, device, cgroup, op) (rate(iowarden_io_bytes_total{s}[{RATE}]))",
                         "{{cgroup}} {{op}} {{device}}")], unit="Bps")


def measured_culprits(d, dev):
    """Who hurts whom as iowarden measures it (the culprit account, on by default): each victim's
    time on the device and in the I/O scheduler by whose requests held the device with or before
    it, as parts of that time."""
    by = "instance, device, victim, culprit"
    behind = (f"sum by ({by}) (rate(iowarden_culprit_seconds_total"
              f"{{{dev[1:-1]}, culprit!=\"none\"}}[{RATE}]))")
    total = (f"sum by (instance, device, victim) "
             f"(rate(iowarden_culprit_seconds_total{dev}[{RATE}]))")
    d.table("Who hurts whom",
            "Per device and victim cgroup, every cgroup whose requests shared the device with the victim's "
            "or held it while the victim's waited in the I/O scheduler (culprit; the victim itself: behind "
            "its own requests; other: the device's series beyond its 16 busiest): the part of the victim's "
            "time on the device and in the scheduler spent behind it (processor sharing: n of the "
            "culprit's among N requests on the device, n/N of the time), and how many of the victim's "
            "requests waited behind it on average. Measured by default (docs/culprits.md).",
            [target(f"{behind} / on (instance, device, victim) group_left () {total}",
                    instant=True, fmt="table"),
             target(behind, instant=True, fmt="table")],
            w=24, h=7,
            rename={"Value #A": "part of the victim's device and scheduler time",
                    "Value #B": "victim's requests behind it (mean)"})


def latency_rows(d, s):
    """Latency heatmaps per stage, p99 and mean, from either histogram form."""
    d.row("Latency")
    d.heatmap("Latency heatmap: total",
              "Requests per second by latency bucket, allocation to completion. Selected cgroups and "
              "devices; classic buckets (a text scrape) or the native histogram (a protobuf scrape).",
              target(heatmap_query(f"{s[1:-1]}, stage=\"total\""), "{{le}}", fmt="heatmap"), w=8)
    for stage, what in (("queue", "allocation to issue: time in the block layer and I/O scheduler, "
                         "where requests wait behind other cgroups'"),
                        ("device", "issue to completion: time in the driver and device")):
        title, description = needs(
            STAGES_FLAG, f"Latency heatmap: {stage}",
            f"Requests per second by latency bucket, {what}. Selected cgroups and devices; classic "
            f"buckets or the native histogram.")
        d.heatmap(title, description,
                  target(heatmap_query(f"{s[1:-1]}, stage=\"{stage}\""), "{{le}}", fmt="heatmap"), w=8)
    d.timeseries("p99 latency by cgroup",
                 "99th percentile of block-layer latency (allocation to completion) per cgroup, "
                 "estimated from the classic buckets or the native histogram, whichever the scrape stored.",
                 [target(p99("total", s), "{{cgroup}} {{device}}")], unit="s")
    d.timeseries("Held back by its own limits vs by others",
                 "Where a request's time goes, on average per cgroup: held by the cgroup's own limits "
                 "before the request existed (the throttle stage: io.max, iocost, io.latency, wbt; under "
                 "the fleet default counters only io.max's hold, add throttle to --io-counters for all "
                 "four), waiting in the queue behind other requests (others), and on the device. A cgroup "
                 "slow by its own limits grows the first; one slowed by a neighbour the second.",
                 [target(per_request(held_by_limits(s), s), "{{cgroup}} own limits"),
                  target(mean_queue_wait(s), "{{cgroup}} queue (others)"),
                  target(per_request(f"sum by (instance, device, cgroup) "
                                     f"(rate(iowarden_io_device_seconds_total{s}[{RATE}]))", s),
                         "{{cgroup}} device")], unit="s", stack=True)
    d.timeseries(*needs(STAGES_FLAG, "p99 queue vs device by cgroup",
                        "Where the p99 goes: queue (waiting to be issued) against device (being served). "
                        "A victim of a noisy neighbour shows a growing queue p99 at a flat device p99."),
                 [target(latency_quantile(0.99, "instance, device, cgroup, stage",
                                          f"{s[1:-1]}, stage=~\"queue|device\""),
                         "{{cgroup}} {{stage}}")], unit="s")
    d.timeseries("Mean latency by cgroup", "Mean block-layer latency (allocation to completion).",
                 [target(f"sum by (instance, device, cgroup) (rate(iowarden_io_latency_seconds_sum{s[:-1]}, stage=\"total\"}}[{RATE}]))"
                         f" / sum by (instance, device, cgroup) (rate(iowarden_io_latency_seconds_count{s[:-1]}, stage=\"total\"}}[{RATE}]))"
                         f" or sum by (instance, device, cgroup) (histogram_sum(rate(iowarden_io_latency_seconds{s[:-1]}, stage=\"total\"}}[{RATE}])))"
                         f" / sum by (instance, device, cgroup) (histogram_count(rate(iowarden_io_latency_seconds{s[:-1]}, stage=\"total\"}}[{RATE}])))",
                         "{{cgroup}} {{device}}")], unit="s")


def lock_and_workload_rows(d, s, dev):
    """Lock wait by site and per I/O; what runs in the cgroups."""
    d.row("Lock wait")
    lk = sel(instance="$instance", cgroup="$cgroup")
    d.timeseries(*needs("--locks", "Lock wait by site",
                        "Time per second tasks of the selected cgroups spent waiting on contended kernel locks, "
                        "by lock site (the innermost non-lock function of the waiter's stack, e.g. "
                        "dd_dispatch_request for mq-deadline's lock); sites beyond the top 10 are summed as "
                        "\"other\"."),
                 [target(f"topk(10, sum by (instance, site) (rate(iowarden_lock_wait_seconds_total{lk}[{RATE}])))",
                         "{{site}} {{instance}}")], unit="s")
    d.timeseries(*needs("--locks", "Lock wait per I/O by cgroup",
                        "Lock wait of each cgroup's tasks divided by its completed requests on the selected "
                        "devices: what a scheduler's or driver's locking costs every I/O (the ICPE'24 finding "
                        "that BFQ and mq-deadline can spend most cycles on lock contention)."),
                 [target(f"sum by (instance, cgroup) (rate(iowarden_lock_wait_seconds_total{lk}[{RATE}]))"
                         f" / sum by (instance, cgroup) (rate(iowarden_io_requests_total{s}[{RATE}]))",
                         "{{cgroup}} {{instance}}")], unit="s")

    d.row("Workloads")
    d.table("Cgroups and their workloads",
            "What iowarden could tell from each cgroup path: Kubernetes pod uid and container id, "
            "container runtime, systemd service, login session. Join with kube-state-metrics' "
            "kube_pod_info on pod_uid for names.",
            [target(f'iowarden_cgroup_info{sel(instance="$instance", cgroup="$cgroup")}',
                    instant=True, fmt="table")],
            hide=("Value",))
    d.timeseries("Device time by workload",
                 "Device busy time per second grouped by what runs in the cgroups (iowarden_cgroup_info): "
                 "pods, containers, services.",
                 [target(f"sum by (instance, kind, pod_uid, container_id, service) "
                         f"(rate(iowarden_io_device_seconds_total{dev}[{RATE}]) "
                         f"* on (instance, cgroup) group_left (kind, pod_uid, container_id, service) "
                         f'iowarden_cgroup_info{sel(instance="$instance")})',
                         "{{kind}} {{service}}{{pod_uid}} {{container_id}}")], unit="percentunit")


# --- 2. iocost ----------------------------------------------------------------

def iocost():
    d = Dashboard(
        "iowarden-iocost", "iowarden / iocost",
        "The io.cost controller per device: vrate against its QoS bounds, busy level, missed "
        "latency targets, per-cgroup hierarchical weights, debt and delay, donations.",
        [INSTANCE,
         query_var("device", "Device", 'label_values(iowarden_iocost_vrate_ratio{instance=~"$instance"}, device)'),
         query_var("cgroup", "Cgroup",
                   'label_values(iowarden_iocost_hweight_active_ratio{instance=~"$instance", device=~"$device"}, cgroup)')],
        tags=["iocost"])
    dev = sel(instance="$instance", device="$device")
    s = sel(instance="$instance", device="$device", cgroup="$cgroup")
    d.row("Device")
    d.timeseries("vrate against QoS min/max",
                 "Virtual rate: how fast iocost lets cost be spent relative to the device model (1 = 100%). "
                 "Pinned at the minimum means the device misses its latency targets even when throttled hard.",
                 [target(f"iowarden_iocost_vrate_ratio{dev}", "vrate {{device}}"),
                  target(f"iowarden_iocost_qos_vrate_min_ratio{dev}", "min {{device}}"),
                  target(f"iowarden_iocost_qos_vrate_max_ratio{dev}", "max {{device}}")],
                 unit="percentunit")
    d.timeseries("Busy level", "iocost's busy level: positive raises throttling, negative relaxes it.",
                 [target(f"iowarden_iocost_busy_level{dev}", "{{device}}")])
    d.timeseries("Missed latency targets", "Parts per million of requests missing the QoS latency target, by op.",
                 [target(f"iowarden_iocost_missed_ppm{dev}", "{{device}} {{op}}")], unit="ppm")
    d.timeseries("Request wait", "Fraction of time requests waited for a request slot (rq_wait).",
                 [target(f"iowarden_iocost_rq_wait_ratio{dev}", "{{device}}")], unit="percentunit")
    d.row("Cgroups")
    d.timeseries("Hierarchical weight: active and in use",
                 "hweight_active is what a cgroup is entitled to; hweight_inuse what it keeps after donating.",
                 [target(f"iowarden_iocost_hweight_active_ratio{s}", "active {{cgroup}}"),
                  target(f"iowarden_iocost_hweight_inuse_ratio{s}", "inuse {{cgroup}}")], unit="percentunit")
    d.timeseries("Weight", "Configured io.weight per cgroup.",
                 [target(f"iowarden_iocost_weight{s}", "{{cgroup}}")])
    d.timeseries("Debt and delay",
                 "Debt: cost a cgroup spent beyond its budget (swap, metadata). Delay: how long its issuers are held back.",
                 [target(f"iowarden_iocost_debt_seconds{s}", "debt {{cgroup}}"),
                  target(f"iowarden_iocost_delay_seconds{s}", "delay {{cgroup}}")], unit="s")
    d.timeseries("Donations", "Weight donation events per second by kind.",
                 [target(f"sum by (instance, device, cgroup, kind) (rate(iowarden_iocost_donation_events_total{s}[{RATE}]))",
                         "{{cgroup}} {{kind}}")], unit="ops")
    d.timeseries("Cost usage by cgroup", "Device time iocost charged to each cgroup, per second.",
                 [target(f"sum by (instance, device, cgroup) (rate(iowarden_iocost_usage_seconds_total{s}[{RATE}]))",
                         "{{cgroup}}")], unit="percentunit", stack=True)
    d.table("Current weights", "Latest hweight in use per cgroup.",
            [target(f"iowarden_iocost_hweight_inuse_ratio{s}", instant=True, fmt="table")],
            rename={"Value": "hweight inuse"})
    return d


# --- 3. NVMe queues ------------------------------------------------------------

def nvme():
    d = Dashboard(
        "iowarden-nvme-queues", "iowarden / NVMe queues",
        "Per submission queue occupancy by cgroup and head-of-line blocking between cgroups: "
        "the nvme programs load with iowarden run --nvme (off by default, three more programs "
        "per NVMe command); the blk-mq hardware queue panel needs nothing more.",
        [INSTANCE,
         query_var("device", "Device", 'label_values(iowarden_nvme_sq_occupancy{instance=~"$instance"}, device)'),
         query_var("qid", "Queue", 'label_values(iowarden_nvme_sq_occupancy{instance=~"$instance", device=~"$device"}, qid)'),
         query_var("cgroup", "Cgroup",
                   'label_values(iowarden_nvme_inflight{instance=~"$instance", device=~"$device"}, cgroup)')],
        tags=["nvme"])
    q = sel(instance="$instance", device="$device", qid="$qid")
    qc = sel(instance="$instance", device="$device", qid="$qid", cgroup="$cgroup")
    d.row("Queues")
    d.timeseries(*needs("--nvme", "Submission queue occupancy", "Commands in each submission queue."),
                 [target(f"iowarden_nvme_sq_occupancy{q}", "{{device}} q{{qid}}")])
    d.timeseries(*needs("--nvme", "In flight by cgroup", "Commands in flight per queue, stacked by cgroup."),
                 [target(f"sum by (instance, device, qid, cgroup) (iowarden_nvme_inflight{qc})",
                         "q{{qid}} {{cgroup}}")], stack=True)
    d.timeseries(*needs("--nvme", "Commands by cgroup", "Commands per second per queue and cgroup."),
                 [target(f"sum by (instance, device, qid, cgroup) (rate(iowarden_nvme_commands_total{qc}[{RATE}]))",
                         "q{{qid}} {{cgroup}}")], unit="ops")
    d.timeseries("blk-mq hardware queue occupancy",
                 "Mean requests in flight per blk-mq hardware queue (Little's law on iowarden_hwq_busy_seconds_total); "
                 "available on every block device, NVMe or not.",
                 [target(f"sum by (instance, device, hctx) (rate(iowarden_hwq_busy_seconds_total{sel(instance='$instance', device='$device')}[{RATE}]))",
                         "{{device}} hctx{{hctx}}")])
    d.row("Head-of-line blocking")
    hol = sel(instance="$instance", device="$device", qid="$qid")
    d.timeseries(*needs("--nvme", "Head-of-line events: victim behind culprit",
                        "Per second, commands of the victim cgroup that completed behind a slower command of the culprit on the same queue."),
                 [target(f"sum by (instance, device, victim, culprit) (rate(iowarden_nvme_hol_events_total{hol}[{RATE}]))",
                         "{{victim}} behind {{culprit}}")], unit="ops")
    d.table(*needs("--nvme", "Who blocks whom", "Head-of-line events over the dashboard's time range."),
            [target(f"sum by (instance, device, qid, victim, culprit) (increase(iowarden_nvme_hol_events_total{hol}[$__range]))",
                    instant=True, fmt="table")], rename={"Value": "events"})
    d.timeseries(*needs("--nvme", "Extra latency from head-of-line blocking",
                        "Latency added to each cgroup's commands by head-of-line blocking."),
                 [target(f"iowarden_nvme_hol_extra_latency_seconds{qc}", "q{{qid}} {{cgroup}}")], unit="s", w=24)
    return d


# --- 4. Tuner ----------------------------------------------------------------

def tuner():
    d = Dashboard(
        "iowarden-tuner", "iowarden / Tuner",
        "What the tuner decided, whether the SLOs hold, and the QoS values it set.",
        [INSTANCE,
         query_var("device", "Device", 'label_values(iowarden_tune_qos_value{instance=~"$instance"}, device)'),
         query_var("cgroup", "Cgroup", 'label_values(iowarden_tune_slo_met{instance=~"$instance"}, cgroup)')],
        tags=["tuner"])
    dev = sel(instance="$instance", device="$device")
    cg = sel(instance="$instance", cgroup="$cgroup")
    d.row("Decisions")
    d.timeseries("Decisions per minute by action", "How often the tuner acted, by action.",
                 [target(f"sum by (instance, device, action) (rate(iowarden_tune_decisions_total{dev}[{RATE}])) * 60",
                         "{{device}} {{action}}")])
    d.table("Decisions in range", "Decisions over the dashboard's time range.",
            [target(f"sum by (instance, device, action) (increase(iowarden_tune_decisions_total{dev}[$__range]))",
                    instant=True, fmt="table")], rename={"Value": "decisions"})
    d.row("SLOs")
    d.state_timeline("SLO met", "Per cgroup and SLO: met (1) or missed (0).",
                     [target(f"iowarden_tune_slo_met{cg}", "{{cgroup}} {{slo}}")])
    d.bargauge("SLO attainment in range", "Fraction of the time range each SLO was met.",
               [target(f"avg_over_time(iowarden_tune_slo_met{cg}[$__range])", "{{cgroup}} {{slo}}", instant=True)],
               unit="percentunit", max_=1)
    d.timeseries("p99 latency by cgroup (measured)",
                 "The latency the SLOs are judged on, from iowarden's histograms.",
                 [target(latency_quantile(0.99, "instance, device, cgroup",
                                          'instance=~"$instance", device=~"$device", cgroup=~"$cgroup", stage="total"'),
                         "{{cgroup}} {{device}}")], unit="s")
    d.bargauge("Missed after first convergence",
               "Share of the decision periods since the search first converged in which the SLO "
               "missed (probes upwards, a device tipping, load changes); NaN until it converges.",
               [target(f"iowarden_tune_slo_periods_missed_after_convergence_total{cg}"
                       f" / iowarden_tune_slo_periods_after_convergence_total{cg}",
                       "{{cgroup}} {{slo}}", instant=True)],
               unit="percentunit", max_=1)
    d.row("QoS")
    d.timeseries("QoS values over time", "Each QoS field the tuner sets, per device.",
                 [target(f"iowarden_tune_qos_value{dev}", "{{device}} {{field}}")])
    return d


# --- 5. iowarden itself --------------------------------------------------------

def self_dashboard():
    d = Dashboard(
        "iowarden-self", "iowarden / iowarden itself",
        "What iowarden costs and whether it sees everything: BPF program run time and count, "
        "table fill, dropped events, poll and scrape durations, probe status, build.",
        [INSTANCE], tags=["self"])
    i = sel(instance="$instance")
    d.row("Health")
    d.stat("Targets up", "Prometheus' view: 1 when the last scrape succeeded.",
           [target(f"up{i}", "{{instance}}", instant=True)], w=6,
           steps=[("red", None), ("green", 1)])
    d.stat("Uptime", "Since the daemon started.",
           [target(f"time() - iowarden_start_time_seconds{i}", "{{instance}}", instant=True)], unit="s", w=6)
    d.stat("Probes not attached", "Optional probes that are not active (see the table for why).",
           [target(f"sum by (instance) (1 - iowarden_probe_active{i})", "{{instance}}", instant=True)], w=6,
           steps=[("green", None), ("orange", 1)])
    d.stat("BPF stats enabled", "Whether the kernel times BPF programs (--bpf-stats or the sysctl); "
           "program cost panels are empty without it.",
           [target(f"iowarden_bpf_stats_enabled{i}", "{{instance}}", instant=True)], w=6)
    d.table("Build", "Version, kernel and host of each iowarden.",
            [target(f"iowarden_build_info{i}", instant=True, fmt="table")], hide=("Value",))
    d.table("Probes", "Every BPF probe, attached (1) or not (0) and why.",
            [target(f"iowarden_probe_active{i}", instant=True, fmt="table")], rename={"Value": "active"})
    d.row("BPF program cost")
    d.timeseries(*needs("--bpf-stats", "CPU time per program",
                        "Fraction of one CPU spent running each BPF program (or the sysctl "
                        "kernel.bpf_stats_enabled=1)."),
                 [target(f"sum by (instance, program) (rate(iowarden_bpf_program_run_seconds_total{i}[{RATE}]))",
                         "{{program}} {{instance}}")], unit="percentunit")
    d.timeseries(*needs("--bpf-stats", "Runs per program",
                        "BPF program runs per second, one per block event (or the sysctl "
                        "kernel.bpf_stats_enabled=1)."),
                 [target(f"sum by (instance, program) (rate(iowarden_bpf_program_runs_total{i}[{RATE}]))",
                         "{{program}} {{instance}}")], unit="ops")
    d.timeseries(*needs("--bpf-stats", "Time per run",
                        "Mean run time of each program, per event (or the sysctl kernel.bpf_stats_enabled=1)."),
                 [target(f"sum by (instance, program) (rate(iowarden_bpf_program_run_seconds_total{i}[{RATE}]))"
                         f" / (sum by (instance, program) (rate(iowarden_bpf_program_runs_total{i}[{RATE}])) > 0)",
                         "{{program}} {{instance}}")], unit="s")
    d.timeseries("Recursion misses", "Runs skipped because the program was already running on the CPU.",
                 [target(f"sum by (instance, program) (rate(iowarden_bpf_program_recursion_misses_total{i}[{RATE}]))",
                         "{{program}} {{instance}}")], unit="ops")
    d.row("Tables and drops")
    d.timeseries("Map fill", "Entries in use over capacity. A full series table drops new (cgroup, device, op) series.",
                 [target(f"iowarden_map_entries{i} / on (instance, map) iowarden_map_capacity{i}",
                         "{{map}} {{instance}}")], unit="percentunit", max_=1)
    d.timeseries("Dropped events", "Events the BPF side could not record fully, per second, by reason.",
                 [target(f"sum by (instance, reason) (rate(iowarden_dropped_total{i}[{RATE}]))",
                         "{{reason}} {{instance}}")], unit="ops")
    d.table("Maps", "Entries and capacity of each table.",
            [target(f"iowarden_map_entries{i}", instant=True, fmt="table"),
             target(f"iowarden_map_capacity{i}", instant=True, fmt="table")],
            rename={"Value #A": "entries", "Value #B": "capacity"})
    ops = sel('op=~"read|write|discard"', instance="$instance")
    d.timeseries("Delivery gap: kernel minus iowarden",
                 "Per device, requests per second the kernel accounted as completed (/proc/diskstats: "
                 "reads, writes, discards) minus those iowarden counted (every cgroup). Zero when BPF saw "
                 "every completion; above zero when the kernel completed requests without running the "
                 "programs, or accounts them differently (see docs/semantics.md).",
                 [target(f"sum by (instance, device) (rate(iowarden_kernel_completed_requests_total{i}[{RATE}]))"
                         f" - sum by (instance, device) (rate(iowarden_io_requests_total{ops}[{RATE}]))",
                         "{{device}} {{instance}}")], unit="reqps")
    d.timeseries("Series exported", "Per-cgroup request series: grows with cgroups x devices x ops.",
                 [target(f"count by (instance) (iowarden_io_requests_total{i})", "{{instance}}")])
    d.row("Polling and scraping")
    d.timeseries("Poll duration", "Time to read the BPF maps, last poll.",
                 [target(f"iowarden_poll_duration_seconds{i}", "{{instance}}")], unit="s")
    d.timeseries("Polls per second", "Map polls per second (1/--interval).",
                 [target(f"rate(iowarden_polls_total{i}[{RATE}])", "{{instance}}")], unit="ops")
    d.timeseries("Scrape duration", "iowarden's own time to answer /metrics (previous scrape) against "
                 "Prometheus' end-to-end scrape duration.",
                 [target(f"iowarden_scrape_duration_seconds{i}", "iowarden {{instance}}"),
                  target(f"scrape_duration_seconds{i}", "prometheus {{instance}}")], unit="s")
    d.timeseries("Samples per scrape", "Samples in each scrape: the exporter's cardinality.",
                 [target(f"scrape_samples_scraped{i}", "{{instance}}")])
    return d


DASHBOARDS = {
    "iowarden-noisy-neighbour.json": noisy_neighbour,
    "iowarden-iocost.json": iocost,
    "iowarden-nvme-queues.json": nvme,
    "iowarden-tuner.json": tuner,
    "iowarden-self.json": self_dashboard,
}


def render(make):
    board = json.loads(json.dumps(make().build(), cls=JSONEncoder))
    for var in board["templating"]["list"]:
        # Grafana shows a query variable's `definition` in the variables list; the
        # SDK's VariableModel has no such field, so it is copied from the query here.
        if var["type"] == "query":
            var["definition"] = var["query"]["query"]
    return json.dumps(board, indent=2) + "\n"


def main(argv):
    check = "--check" in argv
    stale = []
    for name, make in DASHBOARDS.items():
        path = HERE / name
        text = render(make)
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print("dashboards out of date, run make dashboards: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

//! tests/vmtest/run.sh refuses a VMTEST_ONLY that selects no guest script,
//! and a VMTEST_JOBS that is no number of guests, with its own message,
//! before it installs or boots anything; its plan (VMTEST_PLAN) boots every
//! script of a line once, those that must run alone first.

use crate::fixtures;

use std::collections::BTreeMap;
use std::process::Command;

use fixtures::repo;

/// run.sh with `env` and a cache of its own: its output, and whether it
/// created that cache.
fn harness(env: &[(&str, &str)]) -> (std::process::Output, bool) {
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(repo().join("tests/vmtest/run.sh"))
        .envs(env.iter().copied())
        .env("VMTEST_CACHE", cache.path().join("cache"))
        .output()
        .unwrap();
    (out, cache.path().join("cache").exists())
}

/// run.sh with `var=value` exits 1 with `message` alone, before it makes its cache.
fn assert_refused(var: &str, value: &str, message: &str) {
    let (out, cache_made) = harness(&[(var, value)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{var}={value}: {stderr}");
    assert_eq!(stderr.trim(), message, "{var}={value}");
    assert!(
        !cache_made,
        "{var}={value}: the harness created its cache before refusing"
    );
}

#[test]
fn vmtest_only_matching_no_script_is_refused_with_the_harness_message() {
    for only in ["zzz", "zz*", "t-zzz.sh", "m-zzz", "99-*"] {
        assert_refused(
            "VMTEST_ONLY",
            only,
            &format!(
                "vmtest: VMTEST_ONLY='{only}' matches no script in tests/vmtest/guest; nothing would run"
            ),
        );
    }
}

#[test]
fn vmtest_jobs_not_a_positive_number_is_refused_before_anything_runs() {
    for jobs in ["0", "two", "-1"] {
        assert_refused(
            "VMTEST_JOBS",
            jobs,
            &format!("vmtest: VMTEST_JOBS='{jobs}' is not a positive number of guests"),
        );
    }
}

/// A script's `# vmtest-KEY: value` line among its lines 2-5.
fn script_header(text: &str, key: &str) -> Option<String> {
    let tag = format!("# vmtest-{key}: ");
    text.lines()
        .skip(1)
        .take(4)
        .find_map(|l| l.strip_prefix(&tag).map(str::to_string))
}

/// The kernel lines `make vmtest` (and so `make test`) runs.
const DEFAULT_LINES: [&str; 3] = ["6.1", "5.10", "6.12"];

/// run.sh's plan (VMTEST_PLAN) with VMTEST_JOBS=`jobs` on its default
/// lines: its boots as line|command line|drive|beside|scripts|checks|log.
fn plan(jobs: &str) -> Vec<Vec<String>> {
    plan_on(jobs, &[])
}

/// The same with `env` beside (KERNELS=...).
fn plan_on(jobs: &str, env: &[(&str, &str)]) -> Vec<Vec<String>> {
    let mut env = env.to_vec();
    env.extend([("VMTEST_PLAN", "1"), ("VMTEST_JOBS", jobs)]);
    let (out, cache_made) = harness(&env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!cache_made, "the plan created the cache");
    let boots: Vec<Vec<String>> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect();
    assert!(!boots.is_empty(), "no boot planned: {stdout}");
    boots
}

/// Every t-*.sh is planned exactly once on each of `lines` it runs on,
/// and on no other line.
fn assert_each_script_once(boots: &[Vec<String>], lines: &[&str]) {
    let mut planned: BTreeMap<(String, String), usize> = BTreeMap::new();
    for b in boots {
        for script in b[4].split_whitespace() {
            *planned
                .entry((b[0].clone(), script.to_string()))
                .or_default() += 1;
        }
    }
    for entry in std::fs::read_dir(repo().join("tests/vmtest/guest")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if !(name.starts_with("t-") && name.ends_with(".sh")) {
            continue;
        }
        let text = std::fs::read_to_string(repo().join("tests/vmtest/guest").join(&name)).unwrap();
        let own = script_header(&text, "kernels").unwrap_or_else(|| DEFAULT_LINES.join(" "));
        let own: Vec<&str> = own.split_whitespace().collect();
        for line in lines {
            let n = planned.get(&(line.to_string(), name.clone()));
            let want = own.contains(line).then_some(&1);
            assert_eq!(n, want, "{name} on {line}: planned {n:?} times");
        }
    }
}

/// The line built with io.latency (make vmtest-iolatency) boots the
/// scripts that name it, and only those: the rest is Debian's 6.1.
#[test]
fn the_iolatency_line_boots_only_the_scripts_that_name_it() {
    let boots = plan_on("1", &[("KERNELS", "6.1-iolatency")]);
    assert!(boots.iter().all(|b| b[0] == "6.1-iolatency"), "{boots:?}");
    assert_each_script_once(&boots, &["6.1-iolatency"]);
}

#[test]
fn one_guest_at_a_time_keeps_a_lines_scripts_in_one_boot_per_command_line_and_drive() {
    let boots = plan("1");
    assert_each_script_once(&boots, &DEFAULT_LINES);
    let mut per_guest: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for b in &boots {
        assert_eq!(
            b[3], "-",
            "one guest at a time, yet a boot split by its beside marks: {b:?}"
        );
        *per_guest
            .entry((b[0].clone(), b[1].clone(), b[2].clone()))
            .or_default() += 1;
    }
    assert!(per_guest.values().all(|&n| n == 1), "{per_guest:?}");
}

#[test]
fn two_guests_at_once_split_each_line_by_beside_marks_with_the_lone_guests_first() {
    let boots = plan("2");
    assert_each_script_once(&boots, &DEFAULT_LINES);
    let first_beside = boots
        .iter()
        .position(|b| b[3] == "yes")
        .unwrap_or(boots.len());
    assert!(
        boots[first_beside..].iter().all(|b| b[3] == "yes"),
        "a guest that runs alone is planned after one that runs beside: {boots:?}"
    );
    for b in &boots {
        for script in b[4].split_whitespace() {
            let text =
                std::fs::read_to_string(repo().join("tests/vmtest/guest").join(script)).unwrap();
            let beside = script_header(&text, "beside").unwrap_or_else(|| "no".into());
            assert_eq!(
                b[3], beside,
                "{script} on {}: in a guest whose beside is {}",
                b[0], b[3]
            );
        }
    }
}

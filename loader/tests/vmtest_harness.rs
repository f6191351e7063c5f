//! tests/vmtest/run.sh refuses a VMTEST_ONLY that selects no guest script,
//! with its own message, before it installs or boots anything.

use crate::fixtures;

use std::process::Command;

use fixtures::repo;

#[test]
fn vmtest_only_matching_no_script_is_refused_with_the_harness_message() {
    for only in ["zzz", "zz*", "t-zzz.sh", "m-zzz", "99-*"] {
        let cache = tempfile::tempdir().unwrap();
        let out = Command::new(repo().join("tests/vmtest/run.sh"))
            .env("VMTEST_ONLY", only)
            .env("VMTEST_CACHE", cache.path().join("cache"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "VMTEST_ONLY={only}: {stderr}");
        assert_eq!(
            stderr.trim(),
            format!(
                "vmtest: VMTEST_ONLY='{only}' matches no script in tests/vmtest/guest; nothing would run"
            ),
            "VMTEST_ONLY={only}"
        );
        assert!(
            !cache.path().join("cache").exists(),
            "VMTEST_ONLY={only}: the harness created its cache before refusing"
        );
    }
}

#[test]
fn vmtest_jobs_not_a_positive_number_is_refused_before_anything_runs() {
    for jobs in ["0", "two", "-1"] {
        let cache = tempfile::tempdir().unwrap();
        let out = Command::new(repo().join("tests/vmtest/run.sh"))
            .env("VMTEST_JOBS", jobs)
            .env("VMTEST_CACHE", cache.path().join("cache"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "VMTEST_JOBS={jobs}: {stderr}");
        assert_eq!(
            stderr.trim(),
            format!("vmtest: VMTEST_JOBS='{jobs}' is not a positive number of guests"),
            "VMTEST_JOBS={jobs}"
        );
        assert!(
            !cache.path().join("cache").exists(),
            "VMTEST_JOBS={jobs}: the harness created its cache before refusing"
        );
    }
}

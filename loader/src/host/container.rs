//! Container attribution: what a cgroup path says about the workload in it.
//!
//! Pure string parsing of the path (relative to the hierarchy root, as the
//! snapshot carries it), for the layouts container runtimes and systemd
//! create. What a path cannot say — a pod's namespace and name, a
//! container's name — comes only from a [`PodDirectory`] when one is
//! configured (e.g. a file a node agent keeps up to date); otherwise join
//! `iowarden_cgroup_info` with kube-state-metrics' `kube_pod_info` on the
//! pod uid in PromQL.
//!
//! Shapes handled (v1 and v2 hierarchies look the same below the root):
//! - Kubernetes, systemd driver:
//!   `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope`
//!   (also `crio-<id>.scope`, `docker-<id>.scope`, guaranteed pods directly
//!   under `kubepods.slice`, and a kubelet `--cgroup-root` prefix)
//! - Kubernetes, cgroupfs driver: `/kubepods/burstable/pod<uid>/<id>`
//! - Docker: `/system.slice/docker-<id>.scope`, `/docker/<id>`; Podman:
//!   `/machine.slice/libpod-<id>.scope`
//! - systemd services `/system.slice/foo.service` (and anything below),
//!   user sessions `/user.slice/user-1000.slice/session-3.scope`.

use std::collections::HashMap;

use anyhow::{Context, Result};
use serde::Deserialize;

/// What kind of workload a cgroup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// A Kubernetes pod or one of its containers.
    Pod,
    /// A container outside Kubernetes (Docker, Podman).
    Container,
    /// A systemd service (system or user manager).
    Service,
    /// A login session.
    Session,
    #[default]
    Other,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "pod",
            Kind::Container => "container",
            Kind::Service => "service",
            Kind::Session => "session",
            Kind::Other => "other",
        }
    }
}

/// Everything determinable about one cgroup. Empty strings are unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    pub kind: Kind,
    /// Kubernetes pod uid, with dashes (as the API server and kube-state-metrics spell it).
    pub pod_uid: String,
    /// guaranteed, burstable or besteffort.
    pub qos_class: String,
    /// Full container id (hex), without the runtime prefix.
    pub container_id: String,
    /// containerd, crio, docker or podman.
    pub runtime: String,
    /// systemd unit name, e.g. `nginx.service`.
    pub service: String,
    /// Login uid of a user slice.
    pub uid: String,
    pub session: String,
    /// From a [`PodDirectory`] only.
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

impl Attribution {
    /// Label pairs for `iowarden_cgroup_info`, unknown ones left out.
    pub fn labels(&self) -> Vec<(String, String)> {
        let mut out = vec![("kind".to_string(), self.kind.as_str().to_string())];
        for (k, v) in [
            ("pod_uid", &self.pod_uid),
            ("qos_class", &self.qos_class),
            ("container_id", &self.container_id),
            ("runtime", &self.runtime),
            ("service", &self.service),
            ("uid", &self.uid),
            ("session", &self.session),
            ("namespace", &self.namespace),
            ("pod", &self.pod),
            ("container", &self.container),
        ] {
            if !v.is_empty() {
                out.push((k.to_string(), v.clone()));
            }
        }
        out
    }
}

/// Source of the names a cgroup path does not carry. The hook for a kubelet
/// or API-server client, or for a file a node agent writes.
pub trait PodDirectory {
    /// (namespace, pod name) of a pod uid.
    fn pod(&self, uid: &str) -> Option<(String, String)>;
    /// Container name of a container id.
    fn container(&self, id: &str) -> Option<String>;
}

/// A [`PodDirectory`] read from JSON:
/// `{"pods": {"<uid>": {"namespace": "ns", "name": "web-0"}}, "containers": {"<id>": "nginx"}}`.
#[derive(Debug, Default, Deserialize)]
pub struct StaticPodDirectory {
    #[serde(default)]
    pods: HashMap<String, PodName>,
    #[serde(default)]
    containers: HashMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct PodName {
    namespace: String,
    name: String,
}

impl StaticPodDirectory {
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).context("pod map JSON")
    }

    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading pod map {}", path.display()))?;
        Self::from_json(&text).with_context(|| format!("in {}", path.display()))
    }
}

impl PodDirectory for StaticPodDirectory {
    fn pod(&self, uid: &str) -> Option<(String, String)> {
        self.pods
            .get(uid)
            .map(|p| (p.namespace.clone(), p.name.clone()))
    }
    fn container(&self, id: &str) -> Option<String> {
        self.containers.get(id).cloned()
    }
}

fn is_hex_id(s: &str) -> bool {
    s.len() >= 12 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod uid as Kubernetes prints it: 8-4-4-4-12 hex digits. The systemd
/// driver writes it with underscores, which are turned back into dashes.
fn pod_uid(s: &str) -> Option<String> {
    let u = s.replace('_', "-");
    let parts: Vec<&str> = u.split('-').collect();
    let ok = parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()));
    ok.then_some(u)
}

/// `<runtime>-<id>.scope` -> (runtime, id).
fn container_scope(c: &str) -> Option<(&'static str, String)> {
    let body = c.strip_suffix(".scope")?;
    for (prefix, runtime) in [
        ("cri-containerd-", "containerd"),
        ("crio-", "crio"),
        ("docker-", "docker"),
        ("libpod-", "podman"),
    ] {
        if let Some(id) = body.strip_prefix(prefix) {
            if is_hex_id(id) {
                return Some((runtime, id.to_string()));
            }
        }
    }
    None
}

/// Attribution of a cgroup path (relative to the hierarchy root).
pub fn attribute(path: &str) -> Attribution {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    kubernetes(&comps)
        .or_else(|| container(&comps))
        .unwrap_or_else(|| systemd(&comps))
}

/// Kubernetes: a `kubepods` component (systemd slice or cgroupfs dir,
/// possibly under a kubelet --cgroup-root), then QoS, pod, container.
fn kubernetes(comps: &[&str]) -> Option<Attribution> {
    let mut a = Attribution::default();
    if let Some(k) = comps
        .iter()
        .position(|c| *c == "kubepods" || *c == "kubepods.slice" || c.ends_with("-kubepods.slice"))
    {
        for c in &comps[k + 1..] {
            let name = c.strip_suffix(".slice").unwrap_or(c);
            let leaf = name.rsplit('-').next().unwrap_or(name);
            if let Some(q) = ["burstable", "besteffort"].iter().find(|q| leaf == **q) {
                a.qos_class = q.to_string();
            } else if let Some(uid) = name
                .rfind("pod")
                .and_then(|i| pod_uid(&name[i + 3..]))
                .filter(|_| a.pod_uid.is_empty())
            {
                a.pod_uid = uid;
                a.kind = Kind::Pod;
                if a.qos_class.is_empty() {
                    a.qos_class = "guaranteed".into();
                }
            } else if !a.pod_uid.is_empty() && a.container_id.is_empty() {
                if let Some((rt, id)) = container_scope(c) {
                    a.runtime = rt.into();
                    a.container_id = id;
                } else if is_hex_id(c) {
                    // cgroupfs driver: the runtime is not in the path.
                    a.container_id = c.to_string();
                }
            }
        }
        if a.kind == Kind::Pod {
            return Some(a);
        }
    }
    None
}

/// Docker/Podman outside Kubernetes.
fn container(comps: &[&str]) -> Option<Attribution> {
    let mut a = Attribution::default();
    for (i, c) in comps.iter().enumerate() {
        if let Some((rt, id)) = container_scope(c) {
            a.kind = Kind::Container;
            a.runtime = rt.into();
            a.container_id = id;
            return Some(a);
        }
        if *c == "docker" && comps.get(i + 1).is_some_and(|n| is_hex_id(n)) {
            a.kind = Kind::Container;
            a.runtime = "docker".into();
            a.container_id = comps[i + 1].to_string();
            return Some(a);
        }
    }
    None
}

/// systemd: a user's session or service, else the innermost service.
fn systemd(comps: &[&str]) -> Attribution {
    let mut a = Attribution::default();
    // User slices: user-<uid>.slice, then a session scope or the user manager's units.
    if let Some(uid) = comps.iter().find_map(|c| {
        c.strip_prefix("user-")
            .and_then(|s| s.strip_suffix(".slice"))
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    }) {
        a.uid = uid.to_string();
    }
    if let Some(s) = comps.iter().find_map(|c| {
        c.strip_prefix("session-")
            .and_then(|s| s.strip_suffix(".scope"))
    }) {
        a.kind = Kind::Session;
        a.session = s.to_string();
        return a;
    }
    // The innermost service that is not a user manager (`user@1000.service`
    // hosts the user's own services).
    let svc = comps
        .iter()
        .rev()
        .find(|c| c.ends_with(".service") && !c.starts_with("user@"))
        .or_else(|| comps.iter().find(|c| c.ends_with(".service")));
    if let Some(s) = svc {
        a.kind = Kind::Service;
        a.service = s.to_string();
    }
    a
}

/// [`attribute`], then names from `dir` where it knows them.
pub fn attribute_with(path: &str, dir: Option<&dyn PodDirectory>) -> Attribution {
    let mut a = attribute(path);
    if let Some(d) = dir {
        if let Some((ns, name)) = (!a.pod_uid.is_empty()).then(|| d.pod(&a.pod_uid)).flatten() {
            a.namespace = ns;
            a.pod = name;
        }
        if let Some(c) = (!a.container_id.is_empty())
            .then(|| d.container(&a.container_id))
            .flatten()
        {
            a.container = c;
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "8e7d3c6f1b2a4d5e9f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6";
    const UID: &str = "3f1c2e4a-5b6d-4e7f-8a9b-0c1d2e3f4a5b";
    const UID_: &str = "3f1c2e4a_5b6d_4e7f_8a9b_0c1d2e3f4a5b";

    #[test]
    fn kubernetes_systemd_driver() {
        for (rt_prefix, rt) in [
            ("cri-containerd", "containerd"),
            ("crio", "crio"),
            ("docker", "docker"),
        ] {
            let p = format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/{rt_prefix}-{ID}.scope");
            let a = attribute(&p);
            assert_eq!(a.kind, Kind::Pod, "{p}");
            assert_eq!(a.pod_uid, UID);
            assert_eq!(a.qos_class, "burstable");
            assert_eq!(a.container_id, ID);
            assert_eq!(a.runtime, rt);
        }
        // Guaranteed pods sit directly under kubepods.slice.
        let a = attribute(&format!(
            "/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope"
        ));
        assert_eq!(
            (a.pod_uid.as_str(), a.qos_class.as_str()),
            (UID, "guaranteed")
        );
        // The pod cgroup itself: a pod, no container.
        let a = attribute(&format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice"
        ));
        assert_eq!(
            (a.kind, a.qos_class.as_str(), a.container_id.as_str()),
            (Kind::Pod, "besteffort", "")
        );
        // kind / kubelet --cgroup-root=/kubelet.slice.
        let a = attribute(&format!("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope"));
        assert_eq!(
            (
                a.pod_uid.as_str(),
                a.qos_class.as_str(),
                a.container_id.as_str()
            ),
            (UID, "besteffort", ID)
        );
        // CRI-O's conmon scope is not the container.
        let a = attribute(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-conmon-{ID}.scope"
        ));
        assert_eq!((a.kind, a.container_id.as_str()), (Kind::Pod, ""));
    }

    #[test]
    fn kubernetes_cgroupfs_driver() {
        let a = attribute(&format!("/kubepods/burstable/pod{UID}/{ID}"));
        assert_eq!(a.kind, Kind::Pod);
        assert_eq!(
            (
                a.pod_uid.as_str(),
                a.qos_class.as_str(),
                a.container_id.as_str()
            ),
            (UID, "burstable", ID)
        );
        assert_eq!(a.runtime, "");
        let a = attribute(&format!("/kubepods/pod{UID}/{ID}"));
        assert_eq!(
            (a.qos_class.as_str(), a.container_id.as_str()),
            ("guaranteed", ID)
        );
        let a = attribute(&format!("/kubepods/besteffort/pod{UID}"));
        assert_eq!(
            (a.qos_class.as_str(), a.pod_uid.as_str()),
            ("besteffort", UID)
        );
        // The QoS slices alone are not a pod.
        assert_eq!(attribute("/kubepods/burstable").kind, Kind::Other);
        assert_eq!(
            attribute("/kubepods.slice/kubepods-burstable.slice").kind,
            Kind::Other
        );
    }

    #[test]
    fn docker_and_podman() {
        for p in [
            format!("/system.slice/docker-{ID}.scope"),
            format!("/docker/{ID}"),
        ] {
            let a = attribute(&p);
            assert_eq!(
                (a.kind, a.runtime.as_str(), a.container_id.as_str()),
                (Kind::Container, "docker", ID),
                "{p}"
            );
        }
        let a = attribute(&format!("/machine.slice/libpod-{ID}.scope"));
        assert_eq!((a.kind, a.runtime.as_str()), (Kind::Container, "podman"));
        // Rootless podman under the user manager.
        let a = attribute(&format!(
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope"
        ));
        assert_eq!((a.kind, a.container_id.as_str()), (Kind::Container, ID));
        // The Docker daemon itself is a service, not a container.
        let a = attribute("/system.slice/docker.service");
        assert_eq!(
            (a.kind, a.service.as_str()),
            (Kind::Service, "docker.service")
        );
    }

    #[test]
    fn systemd_services_and_sessions() {
        let a = attribute("/system.slice/nginx.service");
        assert_eq!(
            (a.kind, a.service.as_str()),
            (Kind::Service, "nginx.service")
        );
        let a = attribute("/system.slice/system-getty.slice/getty@tty1.service");
        assert_eq!(a.service, "getty@tty1.service");
        // A service's own sub-cgroups belong to it.
        let a = attribute("/system.slice/postgresql.service/worker");
        assert_eq!(a.service, "postgresql.service");
        let a = attribute("/user.slice/user-1000.slice/session-3.scope");
        assert_eq!(
            (a.kind, a.uid.as_str(), a.session.as_str()),
            (Kind::Session, "1000", "3")
        );
        let a = attribute(
            "/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-1.scope",
        );
        assert_eq!(
            (a.kind, a.uid.as_str(), a.service.as_str()),
            (Kind::Service, "1000", "user@1000.service")
        );
        let a =
            attribute("/user.slice/user-1000.slice/user@1000.service/app.slice/syncthing.service");
        assert_eq!(a.service, "syncthing.service");
        for p in ["/", "", "(unattributed)", "/iowarden-test-a", "/init.scope"] {
            assert_eq!(attribute(p), Attribution::default(), "{p}");
        }
    }

    #[test]
    fn names_come_only_from_a_directory() {
        let p = format!("/kubepods/burstable/pod{UID}/{ID}");
        assert!(attribute(&p).pod.is_empty());
        let dir = StaticPodDirectory::from_json(&format!(
            r#"{{"pods": {{"{UID}": {{"namespace": "shop", "name": "db-0"}}}}, "containers": {{"{ID}": "postgres"}}}}"#
        ))
        .unwrap();
        let a = attribute_with(&p, Some(&dir));
        assert_eq!(
            (a.namespace.as_str(), a.pod.as_str(), a.container.as_str()),
            ("shop", "db-0", "postgres")
        );
        let labels = a.labels();
        assert!(labels.contains(&("pod_uid".into(), UID.into())));
        assert!(labels.contains(&("namespace".into(), "shop".into())));
        assert!(
            !labels.iter().any(|(k, _)| k == "service"),
            "unknown labels are left out"
        );
        assert!(StaticPodDirectory::from_json("{").is_err());
    }
}

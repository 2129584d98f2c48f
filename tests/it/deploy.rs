//! The deployment files are checked, not just written:
//! - `deploy/kubernetes/*.yaml` validate against Kubernetes' own schemas,
//!   strictly (an unknown field is an error), with `kubernetes-validate`
//!   (PyPI, pinned, its schemas offline); every flag the Deployment passes
//!   is one `toolhost serve` takes, its probes name `/ready` and `/health`,
//!   and it runs as non-root on a read-only root filesystem.
//! - `deploy/haproxy.cfg` is valid to Debian's haproxy, and the image's
//!   default command takes only flags `toolhost serve` knows.

use std::process::Command;

use crate::support::{repo_root, toolhost_bin};

/// Every `--flag` of `toolhost serve`.
fn serve_flags() -> String {
    let output = Command::new(toolhost_bin())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap()
}

fn assert_flags_known(args: &[String], known: &str, origin: &str) {
    for arg in args.iter().filter(|arg| arg.starts_with("--")) {
        let flag = arg.split('=').next().unwrap();
        assert!(
            known.contains(&format!("{flag} ")) || known.contains(&format!("{flag}\n")),
            "{origin} passes {flag}, which `toolhost serve` does not take"
        );
    }
}

#[test]
fn the_kubernetes_manifests_validate_and_run_toolhost_as_documented() {
    let dir = repo_root().join("deploy/kubernetes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let output = Command::new(crate::support::python_venv().join("kubernetes-validate"))
        .args(["--strict", "--kubernetes-version", "1.34.0"])
        .args(&files)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{said}");
    for kind in [
        "deployment/toolhost",
        "service/toolhost",
        "horizontalpodautoscaler/toolhost",
        "poddisruptionbudget/toolhost",
        "configmap/toolhost-policies",
        "secret/toolhost-tokens",
        "secret/toolhost-request-state-keys",
        "statefulset/toolhost-redis",
        "service/toolhost-redis",
    ] {
        assert!(
            said.contains(&format!("passed for resource {kind}")),
            "{kind}: {said}"
        );
    }

    // What the schemas cannot say.
    let deployment = std::fs::read_to_string(dir.join("deployment.yaml")).unwrap();
    let args: Vec<String> = deployment
        .lines()
        .map(str::trim)
        .filter_map(|line| line.strip_prefix("- --"))
        .map(|flag| format!("--{flag}"))
        .collect();
    assert!(args.len() >= 5, "{args:?}");
    let plugins_mount = deployment
        .split("- name: plugins\n")
        .nth(1)
        .and_then(|rest| rest.split("- name:").next())
        .unwrap();
    assert!(
        !plugins_mount.contains("readOnly"),
        "the plugin folder is written by every publish: {plugins_mount}"
    );
    assert_flags_known(&args, &serve_flags(), "deployment.yaml");
    for needed in [
        "runAsNonRoot: true",
        "readOnlyRootFilesystem: true",
        "allowPrivilegeEscalation: false",
        "path: /ready",
        "path: /health",
        "emptyDir",
        // The write side is shared: the plugin folder is each replica's
        // copy, writable, with the policies mirrored in.
        "- --redis=redis://toolhost-redis:6379/0",
        "- --policies=/etc/toolhost/policies",
        "- --plugins=/var/lib/toolhost/plugins",
    ] {
        assert!(
            deployment.contains(needed),
            "deployment.yaml lacks {needed}"
        );
    }
}

#[test]
fn the_balancer_config_and_the_image_command_are_valid() {
    let haproxy = if std::path::Path::new("/usr/sbin/haproxy").exists() {
        "/usr/sbin/haproxy"
    } else {
        "haproxy"
    };
    let checked = Command::new(haproxy)
        .arg("-c")
        .arg("-f")
        .arg(repo_root().join("deploy/haproxy.cfg"))
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let containerfile = std::fs::read_to_string(repo_root().join("Containerfile")).unwrap();
    let command = containerfile
        .lines()
        .find(|line| line.starts_with("CMD "))
        .unwrap();
    let args: Vec<String> = serde_json::from_str(command.trim_start_matches("CMD ")).unwrap();
    assert_eq!(args[0], "serve");
    assert_flags_known(&args, &serve_flags(), "Containerfile");
    assert!(containerfile.contains("USER 65532"));
}

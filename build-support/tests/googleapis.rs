//! humus-build over a large real set: a googleapis subset (npm's
//! `google-proto-files`, which ships the googleapis tree), which
//! tonic-prost-build compiles too. Every file humus-build writes parses as
//! Rust. How long each takes to build is `tests/bench/build_time.sh
//! googleapis` (BENCHMARKS.md).
//!
//! Needs the package unpacked at `target/google-proto-files/package` (as
//! `.ci/run` does: `npm pack google-proto-files`, then `tar xzf`), or at
//! `$HUMUS_GOOGLEAPIS`. Skips with one line without `HUMUS_INTEROP=1`,
//! fails with it when the files are missing.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The folders of the subset, each with every `.proto` directly in it.
pub const SUBSET: [&str; 14] = [
    "google/cloud/compute/v1",
    "google/longrunning",
    "google/iam/v1",
    "google/pubsub/v1",
    "google/spanner/v1",
    "google/firestore/v1",
    "google/bigtable/v2",
    "google/bigtable/admin/v2",
    "google/logging/v2",
    "google/cloud/kms/v1",
    "google/cloud/secretmanager/v1",
    "google/storage/v2",
    "google/cloud/tasks/v2",
    "google/cloud/dialogflow/v2",
];

/// Where the googleapis tree is, or why the test does not run.
fn root() -> Option<PathBuf> {
    let root = std::env::var_os("HUMUS_GOOGLEAPIS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/google-proto-files/package"),
        PathBuf::from,
    );
    let interop = std::env::var_os("HUMUS_INTEROP").is_some_and(|v| v == "1");
    if root.join("google/longrunning/operations.proto").is_file() {
        Some(root)
    } else if interop {
        panic!(
            "{} has no googleapis tree: run `npm pack google-proto-files` and unpack it there \
             (`.ci/run` does), or set HUMUS_GOOGLEAPIS",
            root.display()
        );
    } else {
        // Straight to the process's stderr, past libtest's capture (which
        // keeps `println!` of a passing test), so the skip is seen.
        let _ = writeln!(
            std::io::stderr(),
            "googleapis: skipped: set HUMUS_INTEROP=1 and unpack google-proto-files (see .ci/run)"
        );
        None
    }
}

/// An include folder holding the tree's `google/*` but `google/protobuf`:
/// the package ships newer well-known types than protox's own, which its
/// parser does not read, and the generated code uses `prost-types` for them
/// anyway.
fn without_well_known_types(root: &Path) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("googleapis-include");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("google")).unwrap();
    for entry in fs::read_dir(root.join("google")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "protobuf" {
            std::os::unix::fs::symlink(entry.path(), dir.join("google").join(entry.file_name()))
                .unwrap();
        }
    }
    dir
}

fn protos(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for folder in SUBSET {
        let mut here: Vec<PathBuf> = fs::read_dir(root.join(folder))
            .unwrap_or_else(|error| panic!("{folder}: {error}"))
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "proto"))
            .collect();
        here.sort();
        files.extend(here);
    }
    files
}

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn humus_build_compiles_a_googleapis_subset_as_tonic_prost_build_does() {
    let Some(root) = root() else {
        return;
    };
    let root = without_well_known_types(&root);
    let files = protos(&root);

    // tonic-prost-build, fed by protox as a build without protoc is.
    let fds = protox::compile(&files, [&root]).expect("protox compiles the subset");
    let services: usize = fds
        .file
        .iter()
        .filter(|file| SUBSET.iter().any(|folder| file.name().starts_with(folder)))
        .map(|file| file.service.len())
        .sum();
    let methods: usize = fds
        .file
        .iter()
        .filter(|file| SUBSET.iter().any(|folder| file.name().starts_with(folder)))
        .flat_map(|file| &file.service)
        .map(|service| service.method.len())
        .sum();
    assert!(
        services >= 150 && methods >= 1400,
        "{services} services, {methods} methods"
    );
    let tonic = out_dir("googleapis-tonic");
    tonic_prost_build::configure()
        .out_dir(&tonic)
        .compile_fds(fds)
        .expect("tonic-prost-build compiles the subset");

    let humus = out_dir("googleapis-humus");
    humus_build::configure()
        .out_dir(&humus)
        .emit_rerun_if_changed(false)
        .compile_protos(&files, &[root])
        .expect("humus-build compiles the subset");

    // One file per package, as tonic-prost-build's, each valid Rust with a
    // humus module per service.
    let names = |dir: &Path| {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&humus), names(&tonic));
    let mut modules = 0;
    for name in names(&humus) {
        let code = fs::read_to_string(humus.join(&name)).unwrap();
        syn::parse_file(&code).unwrap_or_else(|error| panic!("{name}: {error}"));
        // A service's humus module has its callback macro (a package's
        // module has one of its own, named apart).
        modules += code.matches("macro_rules! __humus_client_").count();
    }
    assert_eq!(modules, services);
}

/// The skip says so in `cargo test`'s output, without `--nocapture`: this
/// test binary, run again for the test above with `HUMUS_INTEROP` unset
/// and no googleapis tree, shows the skip line (libtest keeps what
/// `println!` prints in a passing test).
#[test]
fn a_skip_is_seen_without_nocapture() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "humus_build_compiles_a_googleapis_subset_as_tonic_prost_build_does",
        ])
        .env_remove("HUMUS_INTEROP")
        .env("HUMUS_GOOGLEAPIS", env!("CARGO_TARGET_TMPDIR"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
    assert!(
        stderr.contains("googleapis: skipped: set HUMUS_INTEROP=1"),
        "{stdout}\n{stderr}"
    );
}

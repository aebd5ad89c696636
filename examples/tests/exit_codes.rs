//! The standalone binaries' exit codes: 78 for a bad, missing or
//! misspelled variable (read with humus's `app::Env`), naming every one; 1
//! for a server that cannot listen (its address taken), naming its
//! variable.

use std::process::{Command, Output};

fn run(bin: &str, vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new(bin);
    command.env_clear();
    for (k, v) in vars {
        command.env(k, v);
    }
    command.output().expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_wallet_names_every_bad_variable_and_exits_78() {
    let out = run(
        env!("CARGO_BIN_EXE_wallet"),
        &[
            ("LEDGER_TIMEOUT", "soon"),
            ("LEDGER_MAX_ATTEMPTS", "0"),
            ("WALLET_FAULT_INJECTION", "on"),
            // Misspelled: refused, not ignored.
            ("LEDGER_BREAKER_OPENFOR", "2s"),
        ],
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    for var in [
        "LEDGER_ADDR: not set",
        "LEDGER_TIMEOUT: \"soon\" is not a duration",
        "LEDGER_MAX_ATTEMPTS:",
        "WALLET_FAULT_INJECTION: \"on\" is not true or false",
        "WALLET_PLAINTEXT: is not set",
        "LEDGER_BREAKER_OPENFOR: is set, but no setting of the LEDGER_ group has this name: did you mean LEDGER_BREAKER_OPEN_FOR?",
    ] {
        assert!(err.contains(var), "{var:?} not in {err:?}");
    }
}

#[test]
fn the_wallet_checks_the_ledger_address_with_the_clients_check() {
    let out = run(
        env!("CARGO_BIN_EXE_wallet"),
        &[
            ("LEDGER_ADDR", "dns:///ledger:50051"),
            ("WALLET_PLAINTEXT", "true"),
        ],
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("LEDGER_ADDR: "), "{err}");
    assert!(!err.contains("WALLET_"), "{err}");
}

#[test]
fn settings_that_no_one_field_sees_wrong_exit_78_too() {
    // Each passes its own check; a ceiling below the base takes both to
    // see, which humus's reader checks too, under the ceiling's variable.
    let out = run(
        env!("CARGO_BIN_EXE_wallet"),
        &[
            ("LEDGER_ADDR", "127.0.0.1:9"),
            ("WALLET_ADDR", "127.0.0.1:0"),
            ("WALLET_PLAINTEXT", "true"),
            ("LEDGER_BACKOFF_BASE", "2s"),
            ("LEDGER_BACKOFF_MAX", "1s"),
        ],
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("LEDGER_BACKOFF_MAX: 1s is below backoff_base 2s"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_address_another_process_holds_exits_1() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(
        env!("CARGO_BIN_EXE_wallet"),
        &[
            ("LEDGER_ADDR", "127.0.0.1:9"),
            ("WALLET_ADDR", &addr),
            ("WALLET_PLAINTEXT", "true"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // The variable an operator sets, with the setting it is read into.
    assert!(
        stderr(&out).contains(&format!(
            "listening on {addr} (WALLET_ADDR, the server's addr setting): "
        )),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_ledger_names_every_bad_variable_and_exits_78() {
    let out = run(
        env!("CARGO_BIN_EXE_ledger"),
        &[
            ("LEDGER_ADDR", "ledger"),
            ("LEDGER_PLAINTEXT", "on"),
            // The name the ledger read before it read humus's.
            ("LEDGER_LISTEN_ADDR", "127.0.0.1:50051"),
        ],
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    for var in [
        "LEDGER_ADDR: ",
        "LEDGER_PLAINTEXT: \"on\" is not true or false",
        "LEDGER_LISTEN_ADDR: is set, but no setting of the LEDGER_ group has this name",
    ] {
        assert!(err.contains(var), "{var:?} not in {err:?}");
    }
    // The App's exit line says what is wrong, so a reader meets the bad
    // variables no later than the exit 78.
    let exit_line = err
        .lines()
        .find(|l| l.contains("exit 78"))
        .unwrap_or_else(|| panic!("no exit 78 line in {err:?}"));
    assert!(
        exit_line.starts_with("ERROR humus::app: exit 78 (a bad setting): "),
        "{err}"
    );
    for var in [
        "LEDGER_ADDR: ",
        "LEDGER_PLAINTEXT: ",
        "LEDGER_LISTEN_ADDR: ",
    ] {
        assert!(exit_line.contains(var), "{var:?} not in {exit_line:?}");
    }
}

//! The walkthrough's ten phases, run as `cargo run --bin walkthrough`
//! runs them (real TCP on loopback, real time), so CI keeps the README's
//! first command working. Every check is on counts and states, never on
//! durations.

use humus_examples::walkthrough::{self, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_phase_behaves_as_it_says() {
    let svg = std::env::temp_dir().join(format!(
        "humus-walkthrough-{}/timeline.svg",
        std::process::id()
    ));
    let report = walkthrough::run(Options {
        svg: Some(svg.clone()),
        progress: true,
        ..Options::default()
    })
    .await
    .expect("both services start");

    println!("{}", report.table());
    for phase in &report.phases {
        for check in &phase.checks {
            assert!(
                check.passed,
                "phase {:?}: {} (saw {})",
                phase.name, check.what, check.seen
            );
        }
    }
    let names: Vec<&str> = report.phases.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "readiness",
            "normal",
            "write races",
            "charge unavailable",
            "outage",
            "recovery",
            "rollout",
            "fault scenario",
            "rates outage (http)",
            "events (kafka)"
        ]
    );
    assert!(report.passed());

    let picture = std::fs::read_to_string(&svg).expect("the SVG was written");
    assert!(
        picture.contains(r#"class="state open""#),
        "the open breaker is drawn"
    );
    assert!(
        picture.contains(r#"class="http-state open""#),
        "the HTTP client's open breaker is drawn"
    );
    assert!(
        picture.contains(r#"class="bar rejected""#),
        "the rejections are drawn"
    );
    let _ = std::fs::remove_dir_all(svg.parent().unwrap());
}

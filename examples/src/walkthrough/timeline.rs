//! The walkthrough's picture: an SVG timeline of the breaker's state and
//! the attempts per second, hand-written (no plotting dependency).
//!
//! Four bands share one time axis, in seconds since the walkthrough
//! started: the phases, the ledger client's breaker's state (closed, open,
//! half-open, from its transition log records), the exchange-rate (HTTP)
//! client's breaker's state, and a bar per tenth of a second of the
//! attempts the clients sent (succeeded or failed, from the attempts'
//! spans; the Kafka producer's records, from their PRODUCER spans, a
//! record a fault aborted drawn as failed) and the calls their breakers rejected (from the rejected calls'
//! spans), scaled to attempts per second.

use std::fmt::Write as _;
use std::time::Duration;

/// Everything the picture shows, each time as an offset from the start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// How long the walkthrough ran: the right end of the time axis.
    pub length: Duration,
    /// Each phase's name, start and end.
    pub phases: Vec<(String, Duration, Duration)>,
    /// The breaker's state at the start (`closed`, `open`, `half-open`).
    pub initial_state: String,
    /// Each state the ledger client's breaker entered, and when.
    pub transitions: Vec<(Duration, String)>,
    /// Each state the exchange-rate (HTTP) client's breaker entered, and
    /// when; it starts closed.
    pub http_transitions: Vec<(Duration, String)>,
    /// When each attempt that reached the transport started, and whether
    /// it ended OK.
    pub attempts: Vec<(Duration, bool)>,
    /// When each call the breaker rejected was made.
    pub rejected: Vec<Duration>,
}

/// The width of each bar of attempts.
pub const BIN: Duration = Duration::from_millis(100);

const WIDTH: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const PHASES_TOP: f64 = 40.0;
const PHASES_HEIGHT: f64 = 28.0;
const STATE_TOP: f64 = 90.0;
const STATE_HEIGHT: f64 = 22.0;
const HTTP_STATE_TOP: f64 = 118.0;
const BARS_TOP: f64 = 160.0;
const BARS_HEIGHT: f64 = 180.0;
const HEIGHT: f64 = 420.0;

const OK: &str = "#3b7dd8";
const FAILED: &str = "#e8833a";
const REJECTED: &str = "#9a9a9a";

/// The fill of a breaker state's band.
fn state_color(state: &str) -> &'static str {
    match state {
        "closed" => "#5cb85c",
        "open" => "#d9534f",
        "half-open" => "#f0ad4e",
        _ => "#cccccc",
    }
}

impl Timeline {
    /// The SVG document.
    pub fn to_svg(&self) -> String {
        // The axis ends at the end of the bin after the last one, so the
        // last bar is drawn whole.
        let bins = (self.length.as_nanos() / BIN.as_nanos()) as usize + 1;
        let end = BIN * bins as u32;
        let length = end.as_secs_f64();
        let plot = WIDTH - LEFT - RIGHT;
        let x = |t: Duration| LEFT + plot * (t.as_secs_f64() / length).min(1.0);
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            svg,
            r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">humus wallet walkthrough: the clients' breakers and attempts</text>"#
        );

        // Phases.
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">phase</text>"#,
            LEFT - 8.0,
            PHASES_TOP + 18.0
        );
        for (i, (name, start, end)) in self.phases.iter().enumerate() {
            let (x0, x1) = (x(*start), x(*end));
            let fill = if i % 2 == 0 { "#eef2f7" } else { "#dde5ef" };
            let _ = writeln!(
                svg,
                r##"<rect class="phase" x="{x0:.1}" y="{PHASES_TOP}" width="{:.1}" height="{PHASES_HEIGHT}" fill="{fill}" stroke="#b0bccb"><title>{}</title></rect>"##,
                (x1 - x0).max(0.5),
                escape(name)
            );
            // A phase too narrow for its number is named in the legend.
            if x1 - x0 >= 14.0 {
                let _ = writeln!(
                    svg,
                    r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="11">{}</text>"#,
                    (x0 + x1) / 2.0,
                    PHASES_TOP + 18.0,
                    i + 1
                );
            }
        }

        // The breakers' states.
        for (label, top, class, initial, transitions) in [
            (
                "ledger",
                STATE_TOP,
                "state",
                self.initial_state.as_str(),
                &self.transitions,
            ),
            (
                "rates",
                HTTP_STATE_TOP,
                "http-state",
                "closed",
                &self.http_transitions,
            ),
        ] {
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}" text-anchor="end">{label}</text>"#,
                LEFT - 8.0,
                top + 15.0
            );
            let mut state = initial;
            let mut since = Duration::ZERO;
            let mut segments = Vec::new();
            for (at, entered) in transitions {
                segments.push((since, *at, state));
                state = entered;
                since = *at;
            }
            segments.push((since, end, state));
            for (start, end, state) in segments {
                let (x0, x1) = (x(start), x(end));
                let _ = writeln!(
                    svg,
                    r#"<rect class="{class} {state}" x="{x0:.1}" y="{top}" width="{:.1}" height="{STATE_HEIGHT}" fill="{}"><title>{label} breaker {state}: {:.2}s to {:.2}s</title></rect>"#,
                    (x1 - x0).max(0.5),
                    state_color(state),
                    start.as_secs_f64(),
                    end.as_secs_f64()
                );
            }
        }

        // Attempts per second.
        let mut ok = vec![0u32; bins];
        let mut failed = vec![0u32; bins];
        let mut rejected = vec![0u32; bins];
        let bin = |t: &Duration| ((t.as_nanos() / BIN.as_nanos()) as usize).min(bins - 1);
        for (at, good) in &self.attempts {
            if *good {
                ok[bin(at)] += 1;
            } else {
                failed[bin(at)] += 1;
            }
        }
        for at in &self.rejected {
            rejected[bin(at)] += 1;
        }
        let per_second = 1.0 / BIN.as_secs_f64();
        let peak = (0..bins)
            .map(|i| f64::from(ok[i] + failed[i] + rejected[i]) * per_second)
            .fold(0.0, f64::max);
        let scale = nice_ceiling(peak.max(1.0));
        let y = |rate: f64| BARS_TOP + BARS_HEIGHT * (1.0 - rate / scale);
        let _ = writeln!(
            svg,
            r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">attempts / s</text>"#,
            BARS_TOP + BARS_HEIGHT / 2.0,
            BARS_TOP + BARS_HEIGHT / 2.0
        );
        for tick in 0..=4 {
            let rate = scale * f64::from(tick) / 4.0;
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" x2="{}" y1="{:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"##,
                WIDTH - RIGHT,
                y(rate),
                y(rate),
                LEFT - 6.0,
                y(rate) + 3.0,
                rate
            );
        }
        let bar_width = (plot * BIN.as_secs_f64() / length).max(1.0);
        for i in 0..bins {
            let x0 = x(BIN * i as u32);
            let mut base = 0.0;
            for (count, color, class) in [
                (ok[i], OK, "ok"),
                (failed[i], FAILED, "failed"),
                (rejected[i], REJECTED, "rejected"),
            ] {
                if count == 0 {
                    continue;
                }
                let rate = f64::from(count) * per_second;
                let _ = writeln!(
                    svg,
                    r#"<rect class="bar {class}" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{count} {class} at {:.1}s</title></rect>"#,
                    y(base + rate),
                    bar_width * 0.9,
                    BARS_HEIGHT * rate / scale,
                    (BIN * i as u32).as_secs_f64()
                );
                base += rate;
            }
        }

        // The time axis.
        let axis = BARS_TOP + BARS_HEIGHT;
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{axis}" y2="{axis}" stroke="#333333"/>"##,
            WIDTH - RIGHT
        );
        let step = nice_ceiling(length / 10.0).max(0.1);
        let mut t = 0.0;
        while t <= length + 1e-9 {
            let tx = x(Duration::from_secs_f64(t));
            let _ = writeln!(
                svg,
                r##"<line x1="{tx:.1}" x2="{tx:.1}" y1="{axis}" y2="{}" stroke="#333333"/><text x="{tx:.1}" y="{}" text-anchor="middle" font-size="10">{}s</text>"##,
                axis + 4.0,
                axis + 16.0,
                round(t)
            );
            t += step;
        }
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">seconds since the walkthrough started</text>"#,
            LEFT + plot / 2.0,
            axis + 32.0
        );

        // The legend.
        let legend_y = HEIGHT - 24.0;
        let mut lx = LEFT;
        for (label, color) in [
            ("closed", state_color("closed")),
            ("open", state_color("open")),
            ("half-open", state_color("half-open")),
            ("attempt OK", OK),
            ("attempt failed", FAILED),
            ("rejected by the breaker", REJECTED),
        ] {
            let _ = writeln!(
                svg,
                r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{color}"/><text x="{}" y="{legend_y}">{label}</text>"#,
                legend_y - 10.0,
                lx + 16.0
            );
            lx += 22.0 + 7.0 * label.len() as f64;
        }
        let mut names = String::new();
        for (i, (name, _, _)) in self.phases.iter().enumerate() {
            let _ = write!(
                names,
                "{}{} {}",
                if i > 0 { " · " } else { "" },
                i + 1,
                name
            );
        }
        let _ = writeln!(
            svg,
            r##"<text x="{LEFT}" y="{}" font-size="11" fill="#555555">{}</text>"##,
            HEIGHT - 4.0,
            escape(&names)
        );
        svg.push_str("</svg>\n");
        svg
    }
}

/// The smallest of 1, 2 or 5 times a power of ten that is at least `v`.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * magnitude >= v - 1e-9 {
            return m * magnitude;
        }
    }
    10.0 * magnitude
}

/// `v` with at most two decimals, without trailing zeros.
fn round(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_state_band_follows_the_transitions() {
        let timeline = Timeline {
            length: ms(3000),
            phases: vec![
                ("outage".into(), ms(0), ms(1500)),
                ("recovery".into(), ms(1500), ms(3000)),
            ],
            initial_state: "closed".into(),
            transitions: vec![
                (ms(500), "open".into()),
                (ms(1500), "half-open".into()),
                (ms(1800), "closed".into()),
            ],
            http_transitions: vec![(ms(2000), "open".into())],
            attempts: vec![(ms(10), true), (ms(20), false), (ms(1600), true)],
            rejected: vec![(ms(700)), (ms(710))],
        };
        let svg = timeline.to_svg();
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.ends_with("</svg>\n"));
        let states: Vec<&str> = svg
            .lines()
            .filter_map(|l| l.strip_prefix(r#"<rect class="state "#))
            .map(|l| &l[..l.find('"').unwrap()])
            .collect();
        assert_eq!(states, ["closed", "open", "half-open", "closed"]);
        let http_states: Vec<&str> = svg
            .lines()
            .filter_map(|l| l.strip_prefix(r#"<rect class="http-state "#))
            .map(|l| &l[..l.find('"').unwrap()])
            .collect();
        assert_eq!(http_states, ["closed", "open"]);
        assert_eq!(svg.matches(r#"class="phase""#).count(), 2);
        // Two bins hold attempts (one with an OK and a failed one), one
        // holds the two rejections.
        assert_eq!(svg.matches(r#"class="bar ok""#).count(), 2);
        assert_eq!(svg.matches(r#"class="bar failed""#).count(), 1);
        assert!(svg.contains("<title>2 rejected at 0.7s</title>"), "{svg}");
    }

    #[test]
    fn names_are_escaped_and_scales_are_round() {
        let timeline = Timeline {
            length: ms(1000),
            phases: vec![("a<b & \"c\"".into(), ms(0), ms(1000))],
            initial_state: "closed".into(),
            ..Timeline::default()
        };
        let svg = timeline.to_svg();
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot;"));
        assert!(!svg.contains("a<b"));
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(130.0), 200.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
        assert_eq!(round(1.50), "1.5");
        assert_eq!(round(2.0), "2");
    }
}

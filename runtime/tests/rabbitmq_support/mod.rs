//! A real RabbitMQ broker for the tests of one test binary: Debian's
//! `rabbitmq-server`, started once (on first use) as a child process on
//! free loopback ports, with its own node name, Erlang port mapper (epmd)
//! port, cookie and data folder under a temporary directory, and stopped
//! when the test binary exits, however it exits. Each test uses queues of
//! its own, so tests run at once.
//!
//! Where the broker is not installed the tests skip, saying so on one
//! line, unless `HUMUS_INTEROP=1` (CI), where they fail.
//!
//! The broker runs under a small shell supervisor whose standard input is
//! a pipe from the test binary: the pipe closes when the binary exits (a
//! normal end, a panic that aborts, a kill), and the supervisor then stops
//! the node with `rabbitmqctl stop` (or kills it), stops the node's own
//! epmd (on a port of its own, so a system epmd on 4369 is never touched)
//! and removes the data folder. Starting takes about 7 s on 2 cores.

#![allow(dead_code, unreachable_pub)]

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use amqprs::channel::{
    BasicPublishArguments, Channel, ConfirmSelectArguments, QueueDeclareArguments,
    QueuePurgeArguments,
};
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::{BasicProperties, FieldTable};

const SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";
const CTL: &str = "/usr/lib/rabbitmq/bin/rabbitmqctl";

/// How long the broker may take to start on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The running broker.
pub struct Broker {
    pub port: u16,
    pub node: String,
    dir: PathBuf,
    epmd_port: u16,
    /// Held until the process exits: its end tells the supervisor to stop
    /// the broker.
    _lifeline: Mutex<ChildStdin>,
    _supervisor: Mutex<Child>,
}

impl Broker {
    /// The broker of this test binary, started on first use; `None` (after
    /// one printed line) where `rabbitmq-server` is not installed, unless
    /// `HUMUS_INTEROP=1`.
    ///
    /// # Panics
    ///
    /// When the broker does not start; with `HUMUS_INTEROP=1`, when it is
    /// not installed.
    pub fn get() -> Option<&'static Broker> {
        static BROKER: OnceLock<Option<Broker>> = OnceLock::new();
        BROKER
            .get_or_init(|| {
                if !Path::new(SERVER).exists() {
                    if std::env::var("HUMUS_INTEROP").as_deref() == Ok("1") {
                        panic!(
                            "HUMUS_INTEROP=1 but {SERVER} is not installed (apt-get install rabbitmq-server)"
                        );
                    }
                    // Straight to the process's stderr, past libtest's
                    // capture (which keeps `eprintln!` of a passing test),
                    // so the skip is seen.
                    let _ = writeln!(
                        std::io::stderr(),
                        "the RabbitMQ tests: skipped: they need Debian's rabbitmq-server ({SERVER}); apt-get install rabbitmq-server"
                    );
                    return None;
                }
                Some(Broker::start())
            })
            .as_ref()
    }

    fn start() -> Broker {
        let dir = std::env::temp_dir().join(format!(
            "humus-rabbitmq-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        let [port, dist_port, epmd_port] = free_ports();
        let node = format!("humus{}@localhost", std::process::id());
        // Stops the node when the test binary's end closes stdin: politely
        // first, by force if that fails; then its epmd; then its folder.
        let script = r#"
"$SERVER" >"$DIR/server.log" 2>&1 &
server=$!
cat >/dev/null
"$CTL" -n "$NODE" stop >/dev/null 2>&1 || kill -9 "$server" 2>/dev/null
wait "$server"
epmd -port "$ERL_EPMD_PORT" -kill >/dev/null 2>&1
rm -rf "$DIR"
"#;
        let started = Instant::now();
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("SERVER", SERVER)
            .env("CTL", CTL)
            .env("DIR", &dir)
            .env("NODE", &node)
            .env("HOME", &dir)
            .env("RABBITMQ_NODENAME", &node)
            .env("RABBITMQ_NODE_PORT", port.to_string())
            .env("RABBITMQ_DIST_PORT", dist_port.to_string())
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            // The node's own port mapper, on loopback: none is left on
            // 4369, and a system one there is not used.
            .env("ERL_EPMD_PORT", epmd_port.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            // Node distribution on loopback only.
            .env(
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                "-kernel inet_dist_use_interface {127,0,0,1}",
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Its own process group: a Ctrl-C at the terminal reaches the test
        // binary only, whose end then stops the broker in order.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut supervisor = command.spawn().expect("sh starts");
        let lifeline = supervisor.stdin.take().unwrap();
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            let log = || {
                let mut text = String::new();
                if let Ok(mut f) = std::fs::File::open(dir.join("server.log")) {
                    let _ = f.read_to_string(&mut text);
                }
                text
            };
            if let Ok(Some(status)) = supervisor.try_wait() {
                panic!(
                    "rabbitmq-server exited ({status}) before it listened:\n{}",
                    log()
                );
            }
            if started.elapsed() > START_TIMEOUT {
                panic!(
                    "rabbitmq-server did not listen on 127.0.0.1:{port} within {START_TIMEOUT:?}:\n{}",
                    log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "rabbitmq-server {node} listens on 127.0.0.1:{port}, started in {:.1?}",
            started.elapsed()
        );
        Broker {
            port,
            node,
            dir,
            epmd_port,
            _lifeline: Mutex::new(lifeline),
            _supervisor: Mutex::new(supervisor),
        }
    }

    /// The URI of the default virtual host as `user`.
    pub fn uri_as(&self, user: &str, password: &str) -> String {
        format!("amqp://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// The URI of the default virtual host as RabbitMQ's default user.
    pub fn uri(&self) -> String {
        self.uri_as("guest", "guest")
    }

    /// Runs `rabbitmqctl` on the node.
    ///
    /// # Panics
    ///
    /// When it fails.
    pub fn ctl(&self, args: &[&str]) {
        let out = Command::new(CTL)
            .arg("-n")
            .arg(&self.node)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("HOME", &self.dir)
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "rabbitmqctl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Adds the user `name` (password `name`) with every permission on
    /// the default virtual host, once per test binary.
    pub fn user(&self, name: &'static str) -> String {
        static USERS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
        let mut users = USERS.lock().unwrap();
        if !users.contains(&name) {
            self.ctl(&["add_user", name, name]);
            self.ctl(&["set_permissions", "-p", "/", name, ".*", ".*", ".*"]);
            users.push(name);
        }
        self.uri_as(name, name)
    }

    /// A connection and a channel (with publisher confirms) of the bare
    /// client, as `uri`'s user.
    pub async fn open(&self, uri: &str) -> (Connection, Channel) {
        let url = reqwest::Url::parse(uri).unwrap();
        let args = OpenConnectionArguments::new(
            url.host_str().unwrap(),
            url.port().unwrap(),
            url.username(),
            url.password().unwrap(),
        );
        let connection = Connection::open(&args).await.unwrap();
        let channel = connection.open_channel(None).await.unwrap();
        channel
            .confirm_select(ConfirmSelectArguments::default())
            .await
            .unwrap();
        (connection, channel)
    }

    /// Declares the durable queue `name` (purged, if it was there),
    /// through `channel`.
    pub async fn queue(channel: &Channel, name: &str, arguments: FieldTable) {
        let declared = channel
            .queue_declare(
                QueueDeclareArguments::new(name)
                    .durable(true)
                    .arguments(arguments)
                    .finish(),
            )
            .await
            .unwrap();
        assert!(declared.is_some());
        channel
            .queue_purge(QueuePurgeArguments::new(name))
            .await
            .unwrap();
    }

    /// How many messages `queue` holds that no consumer holds unacked.
    pub async fn ready(channel: &Channel, queue: &str) -> u32 {
        let (_, ready, _) = channel
            .queue_declare(QueueDeclareArguments::new(queue).passive(true).finish())
            .await
            .unwrap()
            .unwrap();
        ready
    }
}

/// Publishes `body` to `queue` through the default exchange, with
/// `properties`.
pub async fn publish(channel: &Channel, queue: &str, properties: BasicProperties, body: &[u8]) {
    channel
        .basic_publish(
            properties,
            body.to_vec(),
            BasicPublishArguments::new("", queue),
        )
        .await
        .unwrap();
}

/// Three ports no one listens on now, on loopback.
fn free_ports() -> [u16; 3] {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    [ports[0], ports[1], ports[2]]
}

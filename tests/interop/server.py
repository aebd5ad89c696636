#!/usr/bin/env python3
"""A grpcio (gRPC C core) server of grpc.testing.TestService for humus's
interop tests.

Each test selects the server's behaviour through request metadata:

- ``x-test-id``: the key under which the server counts attempts, so tests
  running against one server do not see each other's attempts;
- ``x-script``: what each attempt of that test id gets, separated by ``;``.
  Attempt n gets entry n (the last entry repeats). An entry is ``OK``,
  ``HANG`` (never answers; the client's deadline ends it), or a status code
  name (``UNAVAILABLE``) optionally followed by ``@`` and a
  ``grpc-retry-pushback-ms`` value (``RESOURCE_EXHAUSTED@300``,
  ``RESOURCE_EXHAUSTED@-1``).

It serves grpc.health.v1.Health too: Check follows the same script, and
answers SERVING.

Every answer, OK or not, carries in its trailer ``x-attempt`` (this
attempt's number for the test id, from 1), ``x-gap-ms`` (milliseconds
since the test id's previous attempt, measured by the server; 0 for the
first) and ``x-peer`` (the client's address and port as the server sees
them, so a test can tell its connections apart).

Usage: server.py --port PORT [--tls-cert PEM --tls-key PEM]
                 [--max-connection-age-ms MS]
It prints ``LISTENING <port>`` on a line of its own once it serves, and runs
until it is killed or its standard input closes.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

PROTO_ROOT = "/usr/share/grpc-proto"


def load_stubs():
    """Generates the Python stubs of grpc/testing/test.proto into a temporary
    folder. The files are copied under another folder name first, since a
    Python package named `grpc` would clash with grpcio's; the proto package,
    and so every name on the wire, stays grpc.testing."""
    out = tempfile.mkdtemp(prefix="humus-interop-")
    src = os.path.join(out, "humus_interop_pb")
    os.makedirs(src)
    for name in ("test", "messages", "empty"):
        with open(os.path.join(PROTO_ROOT, "grpc/testing", name + ".proto")) as f:
            text = f.read().replace('import "grpc/testing/', 'import "humus_interop_pb/')
        with open(os.path.join(src, name + ".proto"), "w") as f:
            f.write(text)
    from grpc_tools import protoc
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = [
        "protoc",
        f"-I{out}",
        f"-I{include}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        "humus_interop_pb/test.proto",
        "humus_interop_pb/messages.proto",
        "humus_interop_pb/empty.proto",
    ]
    with open(os.path.join(PROTO_ROOT, "grpc/health/v1/health.proto")) as f:
        health = f.read()
    with open(os.path.join(src, "health.proto"), "w") as f:
        f.write(health)
    args.append("humus_interop_pb/health.proto")
    if protoc.main(args) != 0:
        sys.exit("protoc failed on grpc/testing/test.proto")
    sys.path.insert(0, out)
    from humus_interop_pb import empty_pb2, messages_pb2, test_pb2_grpc  # noqa: E402
    from humus_interop_pb import health_pb2, health_pb2_grpc  # noqa: E402

    return empty_pb2, messages_pb2, test_pb2_grpc, health_pb2, health_pb2_grpc


empty_pb2, messages_pb2, test_pb2_grpc = None, None, None
health_pb2, health_pb2_grpc = None, None


class Attempts:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_id = {}

    def next(self, test_id):
        now = time.monotonic()
        with self.lock:
            n, last = self.by_id.get(test_id, (0, None))
            n += 1
            self.by_id[test_id] = (n, now)
        gap = 0 if last is None else int((now - last) * 1000)
        return n, gap


ATTEMPTS = Attempts()


def behave(context):
    """Applies this attempt's scripted behaviour. Returns normally for OK."""
    md = dict(context.invocation_metadata())
    test_id = md.get("x-test-id", "")
    script = [e.strip() for e in md.get("x-script", "OK").split(";") if e.strip()]
    n, gap = ATTEMPTS.next(test_id)
    entry = script[min(n, len(script)) - 1] if script else "OK"
    trailer = [("x-attempt", str(n)), ("x-gap-ms", str(gap)), ("x-peer", context.peer())]
    if entry == "OK":
        context.set_trailing_metadata(trailer)
        return
    if entry == "HANG":
        while context.is_active():
            time.sleep(0.01)
        context.abort(grpc.StatusCode.CANCELLED, "hung until the client gave up")
    code, _, pushback = entry.partition("@")
    if pushback:
        trailer.append(("grpc-retry-pushback-ms", pushback))
    context.set_trailing_metadata(trailer)
    context.abort(getattr(grpc.StatusCode, code), f"scripted {code} on attempt {n}")


class TestService(object):
    """grpc.testing.TestService, answering as each request's x-script says."""

    def __getattr__(self, name):
        # Methods this server does not implement (UnimplementedCall, and any
        # a newer test.proto adds) answer UNIMPLEMENTED.
        def unimplemented(request, context):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name} is not implemented")

        return unimplemented

    def EmptyCall(self, request, context):
        behave(context)
        return empty_pb2.Empty()

    def UnaryCall(self, request, context):
        behave(context)
        resp = messages_pb2.SimpleResponse()
        resp.payload.body = b"\0" * request.response_size
        if request.fill_username:
            resp.username = "interop"
        return resp

    def CacheableUnaryCall(self, request, context):
        return self.UnaryCall(request, context)

    def StreamingOutputCall(self, request, context):
        behave(context)
        for p in request.response_parameters:
            resp = messages_pb2.StreamingOutputCallResponse()
            resp.payload.body = b"\0" * p.size
            yield resp

    def StreamingInputCall(self, request_iterator, context):
        behave(context)
        total = sum(len(r.payload.body) for r in request_iterator)
        return messages_pb2.StreamingInputCallResponse(aggregated_payload_size=total)

    def FullDuplexCall(self, request_iterator, context):
        behave(context)
        for r in request_iterator:
            for p in r.response_parameters:
                resp = messages_pb2.StreamingOutputCallResponse()
                resp.payload.body = b"\0" * p.size
                yield resp

    def HalfDuplexCall(self, request_iterator, context):
        behave(context)
        requests = list(request_iterator)
        for r in requests:
            for p in r.response_parameters:
                resp = messages_pb2.StreamingOutputCallResponse()
                resp.payload.body = b"\0" * p.size
                yield resp


class Health(object):
    """grpc.health.v1.Health: SERVING, after the request's x-script."""

    def Check(self, request, context):
        behave(context)
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    def Watch(self, request, context):
        behave(context)
        yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    def List(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "List is not implemented")


def main():
    global empty_pb2, messages_pb2, test_pb2_grpc, health_pb2, health_pb2_grpc
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--max-connection-age-ms", type=int)
    args = parser.parse_args()

    empty_pb2, messages_pb2, test_pb2_grpc, health_pb2, health_pb2_grpc = load_stubs()

    options = [("grpc.so_reuseport", 1)]
    if args.max_connection_age_ms:
        options += [
            ("grpc.max_connection_age_ms", args.max_connection_age_ms),
            ("grpc.max_connection_age_grace_ms", 5000),
        ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=options)
    servicer = TestService()
    # Register the generic handler from the generated stubs.
    test_pb2_grpc.add_TestServiceServicer_to_server(servicer, server)
    health_pb2_grpc.add_HealthServicer_to_server(Health(), server)
    address = f"127.0.0.1:{args.port}"
    if args.tls_cert:
        with open(args.tls_cert, "rb") as f:
            cert = f.read()
        with open(args.tls_key, "rb") as f:
            key = f.read()
        port = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        sys.exit(f"could not bind {address}")
    server.start()
    print(f"LISTENING {port}", flush=True)
    # Run until stdin closes (the test harness dropped us) or we are killed.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()

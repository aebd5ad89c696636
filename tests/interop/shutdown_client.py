#!/usr/bin/env python3
"""grpcio's own client (gRPC's C core) across a humus server's graceful
shutdown (tests/tests/server_interop.rs).

On one channel to 127.0.0.1:PORT it starts a unary call of
/grpc.testing.TestService/EmptyCall whose handler takes ``x-sleep-ms``
milliseconds, prints ``IN FLIGHT``, and waits for a line on its standard
input: the test has started the server's shutdown, and another server has
taken the port. It then waits for the first call, makes a second call on
the same channel, and prints one line of JSON: grpcio's version and each
call's status code. (A second call made while the first is still in flight
could go out on the old connection before its GOAWAY arrives, which the old
server then serves: right, but not what the test asks about.)

Usage: shutdown_client.py --port PORT --sleep-ms MS
"""

import argparse
import json
import sys

import grpc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sleep-ms", type=int, required=True)
    args = parser.parse_args()

    def code(call):
        try:
            call()
            return "OK"
        except grpc.RpcError as err:
            return err.code().name

    with grpc.insecure_channel(f"127.0.0.1:{args.port}") as channel:
        # Raw bytes in and out: Empty encodes to nothing.
        empty_call = channel.unary_unary("/grpc.testing.TestService/EmptyCall")
        first = empty_call.future(
            b"", timeout=20, metadata=(("x-sleep-ms", str(args.sleep_ms)),)
        )
        print("IN FLIGHT", flush=True)
        sys.stdin.readline()
        first_code = code(first.result)
        second = code(lambda: empty_call(b"", timeout=20))
    print(
        json.dumps({"grpcio": grpc.__version__, "first": first_code, "second": second}),
        flush=True,
    )


if __name__ == "__main__":
    main()

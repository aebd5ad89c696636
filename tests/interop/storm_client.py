#!/usr/bin/env python3
"""grpcio's own client (gRPC's C core) in humus's retry-storm benchmark
(tests/benches/retry_storm.rs): it makes CALLS unary calls of
/grpc.testing.TestService/EmptyCall, one after another, with gRPC's retry
policy (three attempts, UNAVAILABLE retried, an initial backoff of 0.1s) and
gRPC retry throttling (gRFC A6) at the given max tokens and token ratio.

Each call carries ``x-test-id`` and ``x-call`` (its index, from 0) in its
metadata, which every retry repeats, so the server counts the attempts of
each call. The script prints one line of JSON: grpcio's version, and how
many calls ended with each status code.

With ``--script S``, each call also carries ``x-script: S``, for the
grpcio test server (server.py), which answers as it says.

Usage: storm_client.py --port PORT --calls N --test-id ID
                       --max-tokens T --token-ratio R [--script S]
"""

import argparse
import json

import grpc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--test-id", required=True)
    parser.add_argument("--max-tokens", type=int, required=True)
    parser.add_argument("--token-ratio", type=float, required=True)
    parser.add_argument("--script")
    args = parser.parse_args()

    config = {
        "methodConfig": [
            {
                "name": [{"service": "grpc.testing.TestService"}],
                "retryPolicy": {
                    "maxAttempts": 3,
                    # Not 1ms: with one that short grpcio's client has been
                    # seen to hang past its deadline (issue 9).
                    "initialBackoff": "0.1s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
        "retryThrottling": {
            "maxTokens": args.max_tokens,
            "tokenRatio": args.token_ratio,
        },
    }
    options = [
        ("grpc.service_config", json.dumps(config)),
        ("grpc.enable_retries", 1),
    ]
    codes = {}
    with grpc.insecure_channel(f"127.0.0.1:{args.port}", options=options) as channel:
        # Raw bytes in and out: Empty encodes to nothing.
        empty_call = channel.unary_unary("/grpc.testing.TestService/EmptyCall")
        for n in range(args.calls):
            metadata = (("x-test-id", args.test_id), ("x-call", str(n)))
            if args.script:
                metadata += (("x-script", args.script),)
            try:
                empty_call(b"", timeout=10, metadata=metadata)
                code = "OK"
            except grpc.RpcError as err:
                code = err.code().name
            codes[code] = codes.get(code, 0) + 1
    print(json.dumps({"grpcio": grpc.__version__, "codes": codes}), flush=True)


if __name__ == "__main__":
    main()

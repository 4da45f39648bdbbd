#!/usr/bin/env python3
"""TLS, mutual TLS, bearer-token auth and request limits of the real rtgen-server, with
certificates this test makes with openssl (a CA, a server certificate for localhost/127.0.0.1,
a client certificate). Also drives rtgen-client's --tls-ca/--auth-token flags, and the Python
example client's --tls-ca/--tls-cert/--tls-key against the mutual-TLS server."""

import os
import subprocess
import sys
import tempfile

import grpc

import ops_harness as h

EXAMPLE_CLIENT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "client", "python", "example_client.py")
TOKEN = "s3cret-token-for-tests"
OTHER_TOKEN = "second-token"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=rtgen test CA", cwd=d)
    for name, ext in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                 "extendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", f"/CN=rtgen test {name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile",
                f"{name}.ext", cwd=d)
    # A second CA whose certificates the server must not accept.
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rogue.key", "-out",
            "rogue.pem", "-days", "2", "-subj", "/CN=rogue", cwd=d)
    return {n: os.path.join(d, n) for n in os.listdir(d)}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def call_code(fn):
    try:
        fn()
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def main():
    args, pb2, pb2_grpc, f = h.begin_test("--client")
    d = tempfile.mkdtemp(prefix="rtgen-tls-")
    c = make_certs(d)
    token_file = os.path.join(d, "tokens.txt")
    with open(token_file, "w") as out:
        out.write(f"# rtgen tokens\n{TOKEN}\n\n{OTHER_TOKEN}\n")
    good = [("authorization", f"Bearer {TOKEN}")]
    info = pb2.GetModelInfoRequest()

    # 1. TLS + bearer auth + limits.
    proc, port, _ = h.start_server(args.server, [
        f"--tls-cert={c['server.pem']}", f"--tls-key={c['server.key']}",
        f"--auth-token-file={token_file}", "--max-message-bytes=65536", "--max-stop-strings=2"])
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=read(c["ca.pem"]))
        with grpc.secure_channel(f"localhost:{port}", creds) as ch:
            stub = pb2_grpc.InferenceStub(ch)
            f.check(call_code(lambda: stub.GetModelInfo(info, metadata=good, timeout=20))
                    == grpc.StatusCode.OK, "TLS: GetModelInfo with the right token works")
            f.check(call_code(lambda: stub.GetModelInfo(
                info, metadata=[("authorization", f"Bearer {OTHER_TOKEN}")], timeout=20))
                == grpc.StatusCode.OK, "TLS: the second token in the file works too")
            text = "".join(r.text for r in stub.Generate(
                h.generate_request(pb2, max_tokens=8), metadata=good, timeout=60))
            f.check(len(text) > 0, f"TLS: Generate with the token streams text ({text!r})")
            for label, md in (("missing", None),
                              ("wrong", [("authorization", "Bearer nope")]),
                              ("not Bearer", [("authorization", TOKEN)])):
                f.check(call_code(lambda: stub.GetModelInfo(info, metadata=md, timeout=20))
                        == grpc.StatusCode.UNAUTHENTICATED,
                        f"TLS: GetModelInfo with a {label} token is UNAUTHENTICATED")
            code = call_code(lambda: list(stub.Generate(h.generate_request(pb2, max_tokens=4),
                                                        timeout=20)))
            f.check(code == grpc.StatusCode.UNAUTHENTICATED,
                    f"TLS: Generate without a token is UNAUTHENTICATED ({code})")
            f.check(h.health_check(ch) == "SERVING", "TLS: health works without a token")
            big = pb2.TokenizeRequest(prompt="x" * 100000)
            code = call_code(lambda: stub.Tokenize(big, metadata=good, timeout=20))
            f.check(code == grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"a request over --max-message-bytes is RESOURCE_EXHAUSTED ({code})")
            req = h.generate_request(pb2, max_tokens=4)
            req.stopping.stop.extend(["a", "b", "c"])
            code = call_code(lambda: list(stub.Generate(req, metadata=good, timeout=20)))
            f.check(code == grpc.StatusCode.INVALID_ARGUMENT,
                    f"more stop strings than --max-stop-strings is INVALID_ARGUMENT ({code})")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as plain:
            code = call_code(lambda: pb2_grpc.InferenceStub(plain).GetModelInfo(
                info, metadata=good, timeout=5))
            f.check(code == grpc.StatusCode.UNAVAILABLE,
                    f"a plaintext client cannot talk to the TLS port ({code})")
        cli = [args.client, "info", f"--target=localhost:{port}", f"--tls-ca={c['ca.pem']}"]
        r = subprocess.run(cli + [f"--auth-token={TOKEN}"], capture_output=True, text=True,
                           timeout=60)
        f.check(r.returncode == 0 and "vocab_size" in r.stdout,
                f"rtgen-client info --tls-ca --auth-token works (exit {r.returncode} "
                f"{r.stderr.strip()})")
        r = subprocess.run(cli, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "RTGEN_AUTH_TOKEN": TOKEN})
        f.check(r.returncode == 0, f"rtgen-client takes RTGEN_AUTH_TOKEN (exit {r.returncode})")
        r = subprocess.run(cli + ["--auth-token=wrong"], capture_output=True, text=True,
                           timeout=60, env={k: v for k, v in os.environ.items()
                                            if k != "RTGEN_AUTH_TOKEN"})
        f.check(r.returncode == 1 and "UNAUTHENTICATED" in r.stderr,
                f"rtgen-client with a wrong token reports UNAUTHENTICATED ({r.stderr.strip()})")
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    # 2. Mutual TLS: a client certificate from the CA is required.
    proc, port, _ = h.start_server(args.server, [
        f"--tls-cert={c['server.pem']}", f"--tls-key={c['server.key']}",
        f"--tls-client-ca={c['ca.pem']}"])
    try:
        target = f"localhost:{port}"
        with_cert = grpc.ssl_channel_credentials(read(c["ca.pem"]), read(c["client.key"]),
                                                 read(c["client.pem"]))
        with grpc.secure_channel(target, with_cert) as ch:
            f.check(call_code(lambda: pb2_grpc.InferenceStub(ch).GetModelInfo(info, timeout=20))
                    == grpc.StatusCode.OK, "mTLS: a client with a CA-signed certificate works")
        for label, creds in (
                ("no certificate", grpc.ssl_channel_credentials(read(c["ca.pem"]))),
                ("a certificate from another CA",
                 grpc.ssl_channel_credentials(read(c["ca.pem"]), read(c["rogue.key"]),
                                              read(c["rogue.pem"])))):
            with grpc.secure_channel(target, creds) as ch:
                code = call_code(lambda: pb2_grpc.InferenceStub(ch).GetModelInfo(info,
                                                                                 timeout=5))
                f.check(code == grpc.StatusCode.UNAVAILABLE,
                        f"mTLS: a client with {label} is rejected ({code})")
        r = subprocess.run([args.client, "health", f"--target={target}",
                            f"--tls-ca={c['ca.pem']}", f"--tls-cert={c['client.pem']}",
                            f"--tls-key={c['client.key']}"], capture_output=True, text=True,
                           timeout=60)
        f.check(r.returncode == 0 and "SERVING" in r.stdout,
                f"rtgen-client health with --tls-cert/--tls-key works ({r.stdout.strip()})")
        # The Python example had no client certificate flags: it could not reach this server.
        example = [sys.executable, EXAMPLE_CLIENT, f"--target={target}", "--prompt=Hi",
                   "--max-tokens=4", "--temperature=0", "--timeout=60",
                   f"--tls-ca={c['ca.pem']}"]
        r = subprocess.run(example + [f"--tls-cert={c['client.pem']}",
                                      f"--tls-key={c['client.key']}"],
                           capture_output=True, text=True, timeout=90)
        f.check(r.returncode == 0 and "finish=" in r.stderr,
                f"example_client.py with --tls-cert/--tls-key is answered (exit {r.returncode}; "
                f"{r.stderr[-160:]!r})")
        r = subprocess.run(example, capture_output=True, text=True, timeout=90)
        f.check(r.returncode == 1, f"example_client.py without a certificate fails "
                                   f"(exit {r.returncode})")
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    # 3. Bearer auth on a plaintext port.
    proc, port, _ = h.start_server(args.server, [f"--auth-token-file={token_file}"])
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = pb2_grpc.InferenceStub(ch)
            f.check(call_code(lambda: stub.GetLoad(pb2.GetLoadRequest(), metadata=good,
                                                   timeout=20)) == grpc.StatusCode.OK,
                    "plaintext: the right token works")
            f.check(call_code(lambda: stub.GetLoad(pb2.GetLoadRequest(), timeout=20))
                    == grpc.StatusCode.UNAUTHENTICATED,
                    "plaintext: a missing token is UNAUTHENTICATED")
            f.check(call_code(lambda: stub.Tokenize(
                pb2.TokenizeRequest(prompt="hi"), metadata=[("authorization", "Bearer x")],
                timeout=20)) == grpc.StatusCode.UNAUTHENTICATED,
                "plaintext: a wrong token is UNAUTHENTICATED")
            f.check(h.health_check(ch) == "SERVING", "plaintext: health works without a token")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    if f.items:
        h.dump_log(proc)
    return f.report()


if __name__ == "__main__":
    sys.exit(main())

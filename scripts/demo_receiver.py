"""The demo's webhook endpoint: a local HTTP receiver (Python's own
http.server) on 127.0.0.1. It answers by the job's payload: "ok" with 200,
"flaky" with 503 on the first attempt and 200 after, "gone" with 404. Every
request is logged to stdout with its webhook-id and, when the Standard
Webhooks library is installed (make setup installs it), whether its
signature verifies with the demo's secret.

    python3 scripts/demo_receiver.py PORT_FILE SECRET
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file, secret = sys.argv[1], sys.argv[2]
try:
    from standardwebhooks.webhooks import Webhook
except ImportError:
    Webhook = None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        job = json.loads(body)
        case = job["payload"].get("case")
        status = {"ok": 200, "gone": 404}.get(case, 503 if job["attempt"] == 1 else 200)
        verified = "not checked"
        if Webhook is not None:
            try:
                Webhook(secret).verify(body.decode(), dict(self.headers))
                verified = "verified"
            except Exception as e:  # the demo shows it rather than stopping
                verified = f"NOT verified: {e}"
        # (one write per line: requests are answered on several threads)
        sys.stdout.write(f"receiver: POST {self.path} webhook-id {self.headers['webhook-id']} "
                         f"job {job['id']} ({case}) attempt {job['attempt']} -> {status}; "
                         f"signature {verified}\n")
        sys.stdout.flush()
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"ok" if status == 200 else b"try again" if status == 503 else b"no such order")

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
with open(port_file, "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()

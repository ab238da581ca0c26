"""moto_server that handles one request at a time.

moto's DynamoDB checks a transaction's conditions and then writes its items
without a lock, under a threaded HTTP server: two TransactWriteItems calls
that arrive together can both pass `version = :v` and both be applied (seen
in `make e2e-controller`: two controller invocations, both answered 200 for
the same STATE version, 9 ms apart), and a failed transaction restores a
copy of the whole table taken before it ran, which can erase a concurrent
write. In AWS a conditional write and a transaction are atomic. This server
is moto's application behind a lock: connections are still served by
threads, the requests themselves run one after another, so the conditions
hold as they do in AWS. Arguments as moto_server's: -H HOST -p PORT.
"""

import argparse
import os
import signal
import sys
import threading

from werkzeug.serving import run_simple

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app


def serialized(app):
    lock = threading.Lock()

    def call(environ, start_response):
        with lock:
            # The whole response is produced under the lock, and the
            # iterable closed as WSGI asks of a server.
            body = app(environ, start_response)
            try:
                return list(body)
            finally:
                if hasattr(body, "close"):
                    body.close()

    return call


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=int(os.environ.get("MOTO_PORT", 5000)))
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, serialized(app), threaded=True)


if __name__ == "__main__":
    main()

"""The front server: nginx in front of gunicorn, as the ``Procfile``'s ``front`` process runs it
(``python -m turkflow.web.front --bind ADDRESS --upstream SOCKET``).

gunicorn's threads read a request themselves: a client that sends its headers or body slowly holds a thread
until it is done, and a handful of such clients (eight connections sending a header line every 5 s) held every
thread of a web process, so every other request waited for over a minute. nginx reads each request whole,
thousands of connections at a time in one event loop, and only then passes it to gunicorn over a Unix socket
in the data directory (nothing else reaches gunicorn); it also takes each answer whole, so a slow reader holds
no thread either. gunicorn's own documentation asks for exactly this proxy in front of its threaded workers.
``python -m bench slow_clients`` measures it.

This writes the configuration into ``DATA_DIR/front/`` (its temporary files and pid there too) and replaces
itself with nginx in the foreground, so whatever runs the Procfile stops it as it stops the other processes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

# nginx takes bodies up to this size and passes them on; the app refuses what is over its own limit
# (``MAX_CONTENT_LENGTH``, 256 KiB) with its own answer, a 413 naming the limit.
MAX_BODY = "1m"
# A client has this long to send its headers, and this long between two reads of its body; then nginx
# closes the connection (gunicorn never saw it).
CLIENT_SECONDS = 30
KEEP_ALIVE_SECONDS = 75  # a worker's browser reuses its connection between turns
CONNECTIONS = 8192  # per nginx process: a slow client costs one, and a proxied request two


def configuration(bind: str, upstream: Path, home: Path, run_as: str | None = None) -> str:
    """nginx's configuration: listen on ``bind`` (``host:port``), pass whole requests to gunicorn's socket
    ``upstream``, keep temporary files and the pid under ``home``; ``run_as``: the user nginx's workers run
    as when it is started as root (the data directory's owner, who can reach the socket)."""
    temp = {kind: home / kind for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
    return f"""# written by turkflow.web.front at every start: change that module, not this file
{f"user {run_as};" if run_as else ""}
worker_processes auto;
worker_rlimit_nofile {CONNECTIONS * 2};
pid {home / "nginx.pid"};
error_log stderr warn;
events {{ worker_connections {CONNECTIONS}; }}
http {{
    access_log off;  # gunicorn logs every request that reaches turkflow
    server_tokens off;
    {" ".join(f"{kind}_temp_path {path};" for kind, path in temp.items())}
    client_header_timeout {CLIENT_SECONDS}s;
    client_body_timeout {CLIENT_SECONDS}s;
    send_timeout {CLIENT_SECONDS}s;
    keepalive_timeout {KEEP_ALIVE_SECONDS}s;
    client_max_body_size {MAX_BODY};
    # the proxies before this one, and this one: what turkflow reads with TURKFLOW_PROXY_HOPS
    map $http_x_forwarded_proto $forwarded_proto {{ "" $scheme; default "$http_x_forwarded_proto, $scheme"; }}
    upstream turkflow {{ server unix:{upstream}; keepalive 32; }}
    server {{
        listen {bind} backlog=4096;
        location / {{
            proxy_pass http://turkflow;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $forwarded_proto;
            proxy_request_buffering on;  # the whole request first (nginx's default, said here on purpose)
            proxy_buffering on;  # the whole answer, so a slow reader holds no gunicorn thread either
            proxy_read_timeout 300s;  # a page may take long on a busy machine; gunicorn's own timeout is 120 s
        }}
    }}
}}
"""


def nginx() -> str:
    """Debian's nginx (``make bootstrap`` installs it): /usr/sbin is not on every user's PATH."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        sys.exit("turkflow front: nginx is not installed; run `make bootstrap` (or `apt-get install nginx`)")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m turkflow.web.front", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bind", required=True, help="host:port to serve the public on, e.g. 0.0.0.0:5000")
    parser.add_argument("--upstream", required=True, type=Path, help="gunicorn's Unix socket")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("TURKFLOW_DATA_DIR", "var")),
                        help="where the configuration and temporary files go (DATA_DIR/front)")
    args = parser.parse_args(argv)
    home = (args.data_dir / "front").resolve()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    run_as = None
    if os.geteuid() == 0:  # nginx's workers would run as nobody, who cannot reach a private data directory
        run_as = Path(args.data_dir).resolve().owner()
    (home / "nginx.conf").write_text(configuration(args.bind, args.upstream.resolve(), home, run_as))
    binary = nginx()
    os.execv(binary, [binary, "-p", str(home), "-c", str(home / "nginx.conf"), "-e", "stderr",
                      "-g", "daemon off;"])


if __name__ == "__main__":
    main()

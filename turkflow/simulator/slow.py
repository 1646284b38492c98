"""Slow clients and the people beside them, for what serves turkflow to the internet (the ``Procfile``'s
``front`` and ``web``): ``SlowClients`` holds connections open that send a request a line or a few bytes at a
time, as a slow or hostile client does; ``take_and_submit`` is local workers taking and submitting turns over
HTTP meanwhile, timed. ``tests/test_stacks.py`` and ``python -m bench slow_clients`` use both.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

import requests
from sqlmodel import select

from turkflow import invites
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle, registry
from turkflow.models import Task
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path

SLOW_HEADERS = b"GET /queue HTTP/1.1\r\nHost: turkflow\r\n"  # then a header line every interval, never the end
SLOW_BODY = (b"POST /queue/take/1 HTTP/1.1\r\nHost: turkflow\r\nContent-Type: application/x-www-form-urlencoded\r\n"
             b"Content-Length: 100000\r\n\r\n")  # then a few bytes of the body every interval


class SlowClients:
    """``count`` connections to ``url``, half sending their headers a line every ``interval`` seconds, half a
    declared 100 kB body a few bytes at a time, none ever finishing; a connection the server closes is opened
    again, as an attacker would. A thread of its own, from ``start`` (which returns once all are open) to
    ``stop``."""

    def __init__(self, url: str, count: int, interval: float = 5.0):
        parts = urlsplit(url)
        self.address = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.count, self.interval = count, interval
        self.reopened = 0  # connections the server closed, opened again
        self._sockets: list[Optional[socket.socket]] = [None] * count
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)

    def _open(self, n: int) -> None:
        connection = socket.create_connection(self.address, timeout=10)
        connection.sendall(SLOW_HEADERS if n % 2 == 0 else SLOW_BODY)
        connection.setblocking(False)
        self._sockets[n] = connection

    def _trickle(self, n: int) -> None:
        connection = self._sockets[n]
        try:
            if _closed(connection):
                raise ConnectionError("closed by the server")
            connection.send(b"X-Slow: 1\r\n" if n % 2 == 0 else b"aaaa")
        except OSError:
            connection.close()
            self.reopened += 1
            self._open(n)

    def start(self) -> "SlowClients":
        for n in range(self.count):
            self._open(n)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            for n in range(self.count):
                if self._stopping.is_set():
                    return
                try:
                    self._trickle(n)
                except OSError:  # the server takes no connection now: try again at the next round
                    pass

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=30)
        for connection in self._sockets:
            if connection is not None:
                connection.close()

    def __enter__(self) -> "SlowClients":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _closed(connection: socket.socket) -> bool:
    """The server closed it, or answered (a 408, a 400): readable, which a request never finished never is."""
    with selectors.DefaultSelector() as selector:
        selector.register(connection, selectors.EVENT_READ)
        return bool(selector.select(timeout=0))


@dataclass
class Timed:
    """Every take's and submit's time in seconds (a request that failed or timed out counts its time, and
    is counted in ``failed``)."""

    seconds: list[float] = field(default_factory=list)
    failed: int = 0

    def p99(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@dataclass
class Person:
    """A local worker's browser: their cookie, their CSRF token."""

    http: requests.Session
    csrf: str


def join(url: str, join_url: str) -> Person:
    http = requests.Session()
    http.get(f"{url}{urlsplit(join_url).path}", timeout=60).raise_for_status()
    queue = http.get(f"{url}/queue", headers={"Accept": "application/json"}, timeout=60)
    queue.raise_for_status()
    return Person(http, queue.json()["csrf_token"])


def take_and_submit(url: str, people: list[Person], hit_ids: list[int], answers: dict[str, str],
                    timeout: float = 30.0) -> Timed:
    """Each person takes and submits their share of ``hit_ids`` (person i every i-th, one at a time: nobody
    races anybody for a turn), all at once; every take and submit timed."""
    timed = Timed()
    lock = threading.Lock()

    def work(n: int) -> None:
        person = people[n]
        headers = {"Accept": "application/json", "X-CSRFToken": person.csrf}
        for number, hit_id in enumerate(hit_ids[n::len(people)]):
            started = time.monotonic()
            try:
                taken = person.http.post(f"{url}/queue/take/{hit_id}", headers=headers, timeout=timeout)
                took = time.monotonic() - started
                taken.raise_for_status()
                started = time.monotonic()
                sent = person.http.post(f"{url}{taken.json()['turn_url']}", headers=headers, timeout=timeout,
                                        json={**answers, "response": f"{answers['response']} ({n}, {number})"})
                sent.raise_for_status()
                with lock:
                    timed.seconds += [took, time.monotonic() - started]
            except (requests.RequestException, KeyError, ValueError):
                with lock:
                    timed.seconds.append(time.monotonic() - started)
                    timed.failed += 1

    with ThreadPoolExecutor(len(people)) as pool:
        list(pool.map(work, range(len(people))))
    return timed


STUDENT_OPENING = {"intent": "request_items", "response": "Hi! What do I need for this?"}


def crowd(settings: Settings, conversations: int, people: int) -> tuple[list[int], list[str]]:
    """A local batch of the sample tasks with ``conversations`` open student turns (their HITs' ids), and
    ``people`` onboarded students' join links."""
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="slow", max_turns=4)
        provider = registry.providers(settings).get("local")
        for hit in hits:
            lifecycle.publish_hit(s, provider, hit.id)
        links = [invites.invite_worker(s, settings.secret_key, settings.public_url, "student", onboarded=True)[1]
                 for _ in range(people)]
        return [hit.id for hit in hits], links


def rounds(url: str, settings: Settings, *, slow_clients: int, rounds: int = 4, people: int = 4,
           turns: int = 16, timeout: float = 30.0) -> dict[str, Timed]:
    """People take and submit ``turns`` turns a round, ``rounds`` rounds, every other one beside
    ``slow_clients`` slow connections (alternating, so the machine's other load weighs on both alike)."""
    hit_ids, links = crowd(settings, conversations=rounds * turns, people=people)
    joined = [join(url, link) for link in links]
    timed = {"alone": Timed(), "beside slow clients": Timed()}
    for n in range(rounds):
        share = hit_ids[n * turns:(n + 1) * turns]
        which = "beside slow clients" if n % 2 else "alone"
        if n % 2:
            with SlowClients(url, slow_clients):  # each mid-request once this returns
                got = take_and_submit(url, joined, share, STUDENT_OPENING, timeout)
        else:
            got = take_and_submit(url, joined, share, STUDENT_OPENING, timeout)
        timed[which].seconds += got.seconds
        timed[which].failed += got.failed
    return timed

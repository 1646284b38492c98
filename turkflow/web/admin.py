"""The admin blueprint: the requester's daily review dashboard under ``/admin``.

Every page needs a signed-in requester (Flask-Login; users come from ``turkflow admin create`` or an admin's
Requesters page) and every POST a CSRF token (Flask-WTF, checked app-wide). A sign-in is a server-side session
(``turkflow.requesters``): the cookie holds a random token, signing out revokes it, and guessing passwords
is throttled per username and per client address. Every read and change is for the signed-in requester's
``access`` (``turkflow.access``: their own batches and those granted them, every batch for an admin): what they
may not see is a 404, what they see but may not change a 403. Views parse the request, call
``turkflow.quality`` and render; every block and unblock goes through ``turkflow.quality.review``, which writes
the audit event.
Whatever a worker wrote is shown through the ``written`` filter, so no character in it can make the page
show other text than was written.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from typing import Any, Optional
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    flash,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask import session as cookie_session
from flask_login import LoginManager, UserMixin, current_user, login_user, logout_user
from flask_wtf import FlaskForm
from markupsafe import Markup
from werkzeug.datastructures import MultiDict
from wtforms import PasswordField, StringField, TextAreaField
from wtforms.validators import DataRequired, Length

from turkflow import access as seen
from turkflow import pipeline, requesters
from turkflow.access import Access
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, ProviderError
from turkflow.hits import keep as keeping, money
from turkflow.hits.provider import Providers
from turkflow.models import ConversationStatus, Requester, ReviewStatus, WorkerStatus, utcnow
from turkflow.protocols.questions import clean_text
from turkflow.quality import activity, dashboard, monitor, review
from turkflow.web import charts
from turkflow.web.http import id_arg, json_object, wants_json
from turkflow.words import counted

bp = Blueprint("admin", __name__, url_prefix="/admin")
login_manager = LoginManager()

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data: https:; script-src 'self'; style-src 'self'; "
    "frame-ancestors 'none'; form-action 'self'; object-src 'none'; base-uri 'self'"
)


def init_admin(app: Flask) -> None:
    """Register the dashboard with its login manager."""
    login_manager.init_app(app)
    login_manager.login_view = "admin.login"
    login_manager.login_message = "Sign in to see the review dashboard."
    app.register_blueprint(bp)


class Reviewer(UserMixin):
    """The signed-in requester, detached from any database session. Flask-Login keeps ``get_id()`` in the
    cookie: the session token, never the requester's id, so revoking the session signs the cookie out."""

    def __init__(self, requester: Requester, token: str):
        self.id = requester.id
        self.username = requester.username
        self.admin = requester.admin
        self.token = token

    def get_id(self) -> str:
        return self.token

    @property
    def actor(self) -> str:
        return f"requester:{self.username}"

    @property
    def access(self) -> Access:
        """What they may see and change, as of this request (an admin's changes apply at once)."""
        return Access(requester_id=self.id, admin=self.admin)


@login_manager.user_loader
def load_reviewer(token: str) -> Optional[Reviewer]:
    with _db() as session:
        requester = requesters.requester_for_session(session, token)
        return Reviewer(requester, token) if requester else None


def _settings() -> Settings:
    return current_app.config["TURKFLOW_SETTINGS"]


def _providers() -> Providers:
    return current_app.config["TURKFLOW_PROVIDERS"]


def _db():  # noqa: ANN202 - a session_scope context manager
    return session_scope(_settings().database_url)


@bp.before_request
def guard() -> Optional[Response]:
    if request.endpoint != "admin.login" and not current_user.is_authenticated:
        return login_manager.unauthorized()
    return None


@bp.after_request
def dashboard_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.context_processor
def helpers() -> dict[str, Any]:
    return {"when": when, "idle": idle, "span": span, "dollars": dollars, "pct": pct, "WorkerStatus": WorkerStatus,
            "charts": charts, "counted": counted, "prolific_configured": bool(_settings().prolific_token)}


def when(moment: Optional[datetime]) -> str:
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M")


def idle(moment: Optional[datetime]) -> str:
    """How long ago, in the largest units that matter."""
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return span(utcnow() - moment)


def span(length: timedelta) -> str:
    """A duration people read at a glance: "3 min", "2 h 5 min", "4 days"."""
    minutes = int(length.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 48 * 60:
        return f"{minutes // 60} h {minutes % 60} min"
    return f"{minutes // (24 * 60)} days"


# Characters that change the direction of the text after them (embeddings, overrides, isolates and marks).
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@bp.app_template_filter("written")
def written(text: Any, isolate: bool = True) -> Markup:
    """Text somebody wrote (a worker's turn, name or answer, a requester's note) as a requester reviews it.

    Each bidi control is shown as a visible marker (``⟨U+202E⟩``) instead of acting: a right-to-left
    override in a turn would otherwise make the page show other text than the worker wrote, and one in a
    name would reverse the words after it. With ``isolate`` the text is also set in ``<bdi>``, so its own
    right-to-left script cannot reorder the page around it (``isolate=False`` where no markup may go: the
    page title, an attribute).
    """
    if text is None:
        return Markup("")
    shown = BIDI_CONTROLS.sub(lambda control: f"⟨U+{ord(control.group()):04X}⟩", str(text))
    return Markup("<bdi>%s</bdi>") % shown if isolate else Markup("%s") % shown


def dollars(cents: Optional[int], currency: str = "USD") -> str:
    """An amount in its currency: a Prolific batch's is its workspace's (``Batch.currency``)."""
    return "—" if cents is None else money.shown(cents, currency)


def pct(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.0%}"


# ---- request parsing: a bad value is a 400 that names the field --------------------------------------


def _choice_arg(name: str, allowed: list[str]) -> Optional[str]:
    raw = request.args.get(name, "")
    if raw and raw not in allowed:
        raise InvalidInput(f"choose one of {', '.join(allowed)}", name)
    return raw or None


def _day_arg() -> Optional[date]:
    raw = request.args.get("day", "")
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"expected a date such as 2025-01-31, got {raw[:40]!r}", "day") from None


def _filled(form_class: type[FlaskForm], *names: str) -> Any:
    """``form_class`` filled from the request: a form, or a JSON object of exactly ``names``, each a string.

    A field that is not one string (a number, a list, an object, sent twice), holds a NUL or is not valid
    Unicode (a lone surrogate), or is not one of ``names`` is a 400 naming the field; a body that is not one
    JSON object (a list, nested deeper than the parser goes) is a 400 naming the body. Nothing else reaches
    a validator, the password check or a query.
    """
    if request.is_json:
        body = json_object(f"send one JSON object of {' and '.join(names)}")
        for name, value in body.items():
            if name not in names:
                raise InvalidInput(f"send only {' and '.join(names)}",
                                   name if name.isprintable() and len(name) <= 64 else "body")
            if not isinstance(value, str):
                raise InvalidInput("expected one string", name)
        sent = MultiDict(body)
    else:
        sent = request.form
        for name in names:
            if len(sent.getlist(name)) > 1:
                raise InvalidInput("send this field once", name)
    for name in names:
        value = sent.get(name, "")
        if "\x00" in value:
            raise InvalidInput("a NUL byte is not allowed here", name)
        try:
            value.encode()
        except UnicodeEncodeError:
            raise InvalidInput("this text is not valid Unicode", name) from None
    return form_class(formdata=sent)


def _safe_next(default: str) -> str:
    """Only redirect back into the dashboard, never to another site."""
    target = request.values.get("next", "")
    parts = urlsplit(target)
    if (target.startswith("/admin") and not parts.scheme and not parts.netloc and "\\" not in target
            and target.isprintable()):  # no CR/LF or other control characters in a Location header
        return target
    return default


# ---- signing in -----------------------------------------------------------------------------------------


class LoginForm(FlaskForm):
    username = StringField("Username", validators=[DataRequired(), Length(max=64)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=256)])


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    if request.method == "GET":
        return render_template("admin/login.html", form=LoginForm())
    form = _filled(LoginForm, "username", "password")
    if not form.validate():
        field, problems = next(iter(form.errors.items()))
        if request.is_json:
            raise InvalidInput(problems[0], field)
        return _not_signed_in(form, f"{field}: {problems[0]}", 400)
    settings = _settings()
    limits = requesters.SignInLimits(settings.sign_in_failures, timedelta(seconds=settings.sign_in_window_seconds))
    with _db() as session:
        attempt = requesters.sign_in(session, form.username.data, form.password.data, request.remote_addr or "",
                                     limits)
        if attempt.retry_after:
            minutes = -(-attempt.retry_after // 60)
            return _not_signed_in(form, f"Too many failed sign-ins: try again in {minutes} min.", 429,
                                  {"Retry-After": str(attempt.retry_after)})
        if attempt.disabled:
            return _not_signed_in(form, "This account is disabled: ask an admin.", 403)
        if attempt.requester is None:
            return _not_signed_in(form, "Wrong username or password.", 401)
        token = requesters.start_session(session, attempt.requester,
                                         timedelta(seconds=settings.admin_session_seconds))
        login_user(Reviewer(attempt.requester, token))
    # A new CSRF token for the signed-in session (Flask-WTF makes one when the old is gone): a token seen
    # before the sign-in, or planted by someone who set this browser's session up, does not work after it.
    field = current_app.config.get("WTF_CSRF_FIELD_NAME", "csrf_token")
    cookie_session.pop(field, None)
    g.pop(field, None)
    return redirect(_safe_next(url_for("admin.batches")))


def _not_signed_in(form: LoginForm, message: str, status: int, headers: Optional[dict[str, str]] = None) -> Any:
    """A refused sign-in: JSON to a program (it sent JSON), the form again, with the message, to a person."""
    if request.is_json:
        return jsonify({"error": message}), status, headers or {}
    return render_template("admin/login.html", form=form, error=message), status, headers or {}


@bp.post("/logout")
def logout() -> Response:
    with _db() as session:
        requesters.end_session(session, current_user.token)
    logout_user()
    return redirect(url_for("admin.login"))


@bp.get("/")
def index() -> Response:
    return redirect(url_for("admin.batches"))


# ---- the review queue -----------------------------------------------------------------------------------


@bp.get("/review")
def review_queue() -> str:
    statuses = [s.value for s in ReviewStatus]
    status = _choice_arg("status", [*statuses, "all"]) or ReviewStatus.pending
    with _db() as session:
        queue = dashboard.review_queue(session, current_user.access, _day_arg(), None if status == "all" else status,
                                       after=request.args.get("after") or None)
    return render_template("admin/review.html", queue=queue, status=status, statuses=[*statuses, "all"])


@bp.post("/review/build")
def build_review() -> Response:
    """Build today's queue now (beat builds it every morning): an admin's, since it covers every worker."""
    seen.check_admin(current_user.access, "rebuild the review queue (Celery beat builds it every morning)")
    with _db() as session:
        built = review.daily_review(session, review.ReviewPolicy.of(_settings()), actor=current_user.actor)
    flash(f"Review queue for {built.day} built: {len(built.entries)} blocked worker(s), "
          f"{built.rater_outliers} rater outlier(s).")
    return redirect(url_for("admin.review_queue", day=built.day.isoformat()))


class DecisionForm(FlaskForm):
    note = TextAreaField("Note", validators=[Length(max=500)])


def _decide(worker_id: int, permanent: bool) -> Response:
    form = _filled(DecisionForm, "note")
    if not form.validate():
        field, problems = next(iter(form.errors.items()))
        raise InvalidInput(problems[0], field)
    note = clean_text(form.note.data or "", "note")
    with _db() as session:
        worker = seen.worker(session, current_user.access, worker_id)
        seen.check_change_status(session, current_user.access, worker)
        act = review.block_permanently if permanent else review.unblock
        changed = act(session, worker, actor=current_user.actor, note=note)
        name = worker.name or worker.external_id
    if not changed:
        flash(f"{name} was already {'blocked permanently' if permanent else 'active'}; nothing changed.")
    else:
        flash(f"{name} {'is blocked permanently' if permanent else 'is unblocked and can take turns again'}.")
        try:
            pipeline.carry_out_status(_settings(), _providers(), worker_id)
        except ProviderError as exc:
            flash(f"Their crowd platform could not be told yet ({exc}); turkflow keeps trying every few "
                  "seconds, and its own pages follow the decision already.")
    return redirect(_safe_next(url_for("admin.worker", worker_id=worker_id)))


@bp.post("/workers/<int:worker_id>/block")
def block(worker_id: int) -> Response:
    return _decide(worker_id, permanent=True)


@bp.post("/workers/<int:worker_id>/unblock")
def unblock(worker_id: int) -> Response:
    return _decide(worker_id, permanent=False)


# ---- workers --------------------------------------------------------------------------------------------


@bp.get("/workers")
def workers() -> str:
    status = _choice_arg("status", [s.value for s in WorkerStatus])
    with _db() as session:
        rows = dashboard.workers(session, current_user.access, status, id_arg("before"), limit=51)
    return render_template("admin/workers.html", workers=rows[:50], more=len(rows) > 50, status=status,
                           statuses=[s.value for s in WorkerStatus])


@bp.get("/workers/<int:worker_id>")
def worker(worker_id: int) -> str:
    settings = _settings()
    with _db() as session:
        page = dashboard.worker_page(session, current_user.access, worker_id)
    quality_chart = charts.lines(
        {"relevant": [(f"#{i}", rel) for i, rel, _ in page.quality],
         "useful": [(f"#{i}", use) for i, _, use in page.quality]},
        "Quality over time", marks=[(settings.block_below, "block below"), (settings.bonus_above, "bonus above")],
        order=[f"#{i}" for i, _, _ in page.quality],
    )
    return render_template("admin/worker.html", page=page, sections=dashboard.SECTIONS, quality_chart=quality_chart)


@bp.get("/workers/<int:worker_id>/<section>")
def worker_section(worker_id: int, section: str) -> str:
    with _db() as session:
        found = seen.worker(session, current_user.access, worker_id)
        rows = dashboard.worker_section(session, current_user.access, worker_id, section, id_arg("before"), limit=51)
        turns = review.turns_by_id(session, [getattr(r, "rated_turn_id", None) for r in rows], current_user.access)
    return render_template("admin/worker_section.html", worker=found, section=section,
                           title=dashboard.SECTIONS[section], items=rows[:50], more=len(rows) > 50, turns=turns)


# ---- batches and conversations -------------------------------------------------------------------------


@bp.get("/batches")
def batches() -> str:
    with _db() as session:
        rows = dashboard.batches(session, current_user.access, id_arg("before"), limit=51)
        owners = requesters.usernames(session, {b.requester_id for b in rows})
    return render_template("admin/batches.html", batches=rows[:50], more=len(rows) > 50, owners=owners)


@bp.get("/batches/<int:batch_id>")
def batch(batch_id: int) -> str:
    settings = _settings()
    with _db() as session:
        page = dashboard.batch_page(session, current_user.access, batch_id, utcnow(),
                                    timedelta(seconds=settings.stuck_after_seconds))
    batch = page.batch
    series = {}
    for role, days in sorted(page.activity.quality.items()):
        series[f"{role} turns relevant"] = [(d.isoformat(), rel) for d, rel, _, _ in days]
        series[f"{role} turns useful"] = [(d.isoformat(), use) for d, _, use, _ in days]
    quality_chart = charts.lines(series, "Quality over time", marks=[(batch.block_below, "block below"),
                                                                       (batch.bonus_above, "bonus above")])
    label_charts = [
        (role, charts.bars([(label.replace("_", " "), n) for label, n in counts.items()], f"{role} labels",
                           css=f"bar {role}"))
        for role, counts in sorted(page.activity.labels.items())
    ]
    prolific_studies, prolific_places = [], ""
    if batch.provider == "prolific":
        from turkflow.web.prolific import places_of, studies_of

        with _db() as session:
            prolific_studies = studies_of(session, batch_id)
        prolific_places = places_of(batch)
    return render_template(
        "admin/batch.html", page=page, progress=page.progress, batch=batch, block_below=batch.block_below,
        prolific_studies=prolific_studies, prolific_places=prolific_places, keep=keeping.of_batch(batch),
        bonus_above=batch.bonus_above, block_policy=monitor.Policy.of(batch).text, quality_chart=quality_chart,
        label_charts=label_charts,
        turns_per_hour=[(hour.strftime("%d %Hh"), n) for hour, n in page.activity.hours],
    )


@bp.post("/batches/<int:batch_id>/count")
def count_batch(batch_id: int) -> Response:
    """Count the batch's progress and money now, rather than wait for beat's next count."""
    with _db() as session:
        activity.count_batch(session, seen.batch(session, current_user.access, batch_id), utcnow())
    return redirect(url_for("admin.batch", batch_id=batch_id), 303)


@bp.get("/batches/<int:batch_id>/agents")
def agents_report(batch_id: int) -> str:
    """The agents' report of a batch (``turkflow agents report``): each agent's figures with their intervals,
    the differences between agents, and the judges, each linked to their worker page; ``?exclude=careless``
    leaves the careless judges out."""
    from turkflow.agents import evaluation, report

    exclude = _choice_arg("exclude", ["careless"]) == "careless"
    built, batch = _agents_report(batch_id, exclude)
    with _db() as session:
        judges = {judge: (worker.id, worker.name or worker.external_id)
                  for judge, worker in evaluation.judges_of(session, batch_id, _settings().worker_hash_key).items()}
    return render_template("admin/agents.html", batch=batch, report=built, exclude=exclude, judges=judges,
                           labels=report.LABELS, rows=report.table_rows, difference_text=report.difference_text,
                           units={name: unit for name, _, unit in report.MEASURES})


@bp.get("/batches/<int:batch_id>/agents.png")
def agents_plot(batch_id: int) -> Response:
    from turkflow.agents import report

    built, _ = _agents_report(batch_id, _choice_arg("exclude", ["careless"]) == "careless")
    return Response(report.plot(built), mimetype="image/png")


def _agents_report(batch_id: int, exclude_careless: bool) -> tuple[dict[str, Any], Any]:
    """The report (statistics imported when asked for: they load scipy)."""
    from turkflow.agents import evaluation, report

    with _db() as session:
        batch = seen.batch(session, current_user.access, batch_id)
        records = evaluation.batch_records(session, batch_id, _settings().worker_hash_key)
        session.expunge(batch)
    return report.build(records, report.Options(exclude_careless=exclude_careless)), batch


@bp.get("/batches/<int:batch_id>/conversations")
def conversations(batch_id: int) -> str:
    statuses = [s.value for s in ConversationStatus]
    status = _choice_arg("status", statuses)
    with _db() as session:
        listing = dashboard.batch_conversations(session, current_user.access, batch_id, status, id_arg("before"))
    return render_template("admin/conversations.html", listing=listing, status=status, statuses=statuses)


@bp.get("/conversations/<int:conversation_id>")
def conversation(conversation_id: int) -> str:
    with _db() as session:
        page = dashboard.conversation_page(session, current_user.access, conversation_id)
    return render_template("admin/conversation.html", page=page)


# ---- Prolific bonuses nobody can tell were paid (their Prolific side: turkflow.web.prolific) ----------


@bp.get("/prolific/bonuses")
def prolific_bonuses() -> str:
    """Bonuses whose pay call crashed or failed and that Prolific still shows unpaid after the stated time,
    with what Prolific shows for each submission now, for a person to release or mark settled."""
    from turkflow.web.prolific import stuck_bonuses

    return render_template("admin/prolific_bonuses.html",
                           bonuses=stuck_bonuses(_settings(), _providers(), current_user.access),
                           after=_settings().prolific_bonus_unknown_after_seconds)


@bp.post("/prolific/bonuses/<int:bonus_id>/<any(release, settle):decision>")
def decide_prolific_bonus(bonus_id: int, decision: str) -> Response:
    from turkflow.web.prolific import decide_bonus

    with _db() as session:
        seen.bonus(session, current_user.access, bonus_id)
    flash(decide_bonus(_settings(), _providers(), bonus_id, decision, current_user.username))
    return redirect(url_for("admin.prolific_bonuses"))


# ---- requesters: an admin's (``turkflow.requesters``; what each may see: ``turkflow.access``) -----------------


class RequesterForm(FlaskForm):
    username = StringField("Username", validators=[DataRequired(), Length(max=64)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=256)])
    admin = StringField("Admin")


class GrantForm(FlaskForm):
    batch = StringField("Batch", validators=[DataRequired(), Length(max=10)])


def _admin() -> Access:
    access = current_user.access
    seen.check_admin(access, "manage requesters")
    return access


def _requester_json(requester: Requester, granted: list[int]) -> dict[str, Any]:
    return {"id": requester.id, "username": requester.username, "admin": requester.admin,
            "disabled": requester.disabled_at is not None, "granted": granted}


@bp.get("/requesters")
def requesters_page() -> Any:
    """Every requester, whether an admin or disabled, and the batches granted them; forms to change each."""
    _admin()
    with _db() as session:
        people, granted = requesters.requesters(session), requesters.grants(session)
        if wants_json():
            return jsonify(requesters=[_requester_json(r, granted.get(r.id, [])) for r in people])
        owned = requesters.owned(session)
        return render_template("admin/requesters.html", people=people, granted=granted, owned=owned)


@bp.post("/requesters")
def create_requester() -> Any:
    _admin()
    form = _filled(RequesterForm, "username", "password", "admin")
    if not form.validate():
        field, problems = next(iter(form.errors.items()))
        raise InvalidInput(problems[0], field)
    with _db() as session:
        made = requesters.create_requester(session, form.username.data, form.password.data,
                                           admin=_yes(form.admin.data, "admin"), actor=current_user.actor)
        shown = _requester_json(made, [])
    return _changed(shown, f"{shown['username']} can sign in now" + (" as an admin." if shown["admin"] else "."))


@bp.post("/requesters/<int:requester_id>/<any(admin, 'not-admin', disable, enable):change>")
def change_requester(requester_id: int, change: str) -> Any:
    """Make a requester an admin or not, disable or enable their account."""
    _admin()
    with _db() as session:
        requester = requesters.get_requester(session, requester_id)
        if change in ("admin", "not-admin"):
            changed = requesters.set_admin(session, requester, change == "admin", actor=current_user.actor)
        else:
            changed = requesters.set_disabled(session, requester, change == "disable", actor=current_user.actor)
        shown = _requester_json(requester, requesters.grants(session).get(requester.id, []))
    done = {"admin": "is an admin", "not-admin": "is no admin", "disable": "is disabled",
            "enable": "can sign in again"}[change]
    return _changed(shown, f"{shown['username']} {done}." if changed else f"{shown['username']} already {done}.")


@bp.post("/requesters/<int:requester_id>/grants")
def grant_batch(requester_id: int) -> Any:
    """Open a batch to a requester: they see and change it as their own."""
    access = _admin()
    form = _filled(GrantForm, "batch")
    raw = form.batch.data or ""
    if not (raw.isascii() and raw.isdigit()):
        raise InvalidInput(f"expected a batch's number, got {raw[:40]!r}", "batch")
    with _db() as session:
        requester = requesters.get_requester(session, requester_id)
        batch = seen.batch(session, access, int(raw))
        changed = requesters.grant(session, requester, batch, actor=current_user.actor)
        shown = _requester_json(requester, requesters.grants(session).get(requester.id, []))
    return _changed(shown, f"Batch {raw} is open to {shown['username']}." if changed else
                    f"{shown['username']} could see batch {raw} already.")


@bp.post("/requesters/<int:requester_id>/grants/<int:batch_id>/revoke")
def revoke_batch(requester_id: int, batch_id: int) -> Any:
    access = _admin()
    with _db() as session:
        requester = requesters.get_requester(session, requester_id)
        changed = requesters.revoke(session, requester, seen.batch(session, access, batch_id), actor=current_user.actor)
        shown = _requester_json(requester, requesters.grants(session).get(requester.id, []))
    return _changed(shown, f"Batch {batch_id} is no longer open to {shown['username']}." if changed else
                    f"Batch {batch_id} was not granted to {shown['username']}; nothing changed.")


def _yes(value: Optional[str], field: str) -> bool:
    """A checkbox: checked ("yes", "on") or not (empty)."""
    if value in ("", None):
        return False
    if value in ("yes", "on"):
        return True
    raise InvalidInput("send yes or nothing", field)


def _changed(shown: dict[str, Any], message: str) -> Any:
    """What a change to a requester answers: the requester as JSON to a program, the page again to a person."""
    if wants_json() or request.is_json:
        return jsonify(requester=shown, message=message)
    flash(message)
    return redirect(url_for("admin.requesters_page") + f"#requester-{shown['id']}", 303)

"""The protocol as data: what each role sees and which questions its turn page asks.

Forms (templates), server-side validation and the dataset export all read the definitions here, so a
question changes in one place. Wizard of Tasks (Choi et al., section 3 and appendix A) is built in; another
protocol is another ``Protocol`` value registered in ``PROTOCOLS``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence
from urllib.parse import urlparse

from turkflow.errors import InvalidAnswer, InvalidInput

if TYPE_CHECKING:
    from turkflow.models import Task

YES_NO = (("yes", "Yes"), ("no", "No"))


@dataclass(frozen=True)
class TurnContext:
    """What validation needs to know about the turn being answered."""

    index: int
    role: str
    shareable: tuple[str, ...] = ()  # document item ids a teacher may share
    shared_so_far: tuple[str, ...] = ()  # item ids teachers shared earlier in this conversation
    document_text: str = ""


@dataclass(frozen=True)
class Question:
    name: str
    label: str
    kind: str  # yes_no | choice | multi_items | text | urls | rating (a survey's 1-5)
    options: tuple[tuple[str, str], ...] = ()
    help: str = ""
    asked: Callable[[TurnContext], bool] = lambda ctx: True
    required: Callable[[TurnContext, dict], bool] = lambda ctx, answers: True
    items: str = ""  # for multi_items: "shareable" or "shared_so_far"
    is_rating: bool = False
    is_label: bool = False
    is_response: bool = False
    claims_success: bool = False  # a survey's yes/no on whether the task was done (the claimed success of a dialog)


@dataclass(frozen=True)
class RoleForm:
    role: str
    title: str
    guidelines: tuple[str, ...]
    sees_document: bool
    questions: tuple[Question, ...]
    paste_blocked: bool = False
    sees: tuple[str, ...] = ()  # what the page shows besides the chat (STAR: scenario, flow_chart, ...)
    actions: tuple[str, ...] = ()  # the logged actions the role may take (STAR's event log)
    survey: tuple[Question, ...] = ()  # asked once when the conversation ends (STAR's questionnaires)

    def questions_for(self, ctx: TurnContext) -> list[Question]:
        return [q for q in self.questions if q.asked(ctx)]

    def label_question(self) -> Question:
        return next(q for q in self.questions if q.is_label)


@dataclass(frozen=True)
class Protocol:
    name: str
    first_role: str
    roles: dict[str, RoleForm]
    closing_label: str  # the first role's label that ends the conversation
    closing_reply: bool = True  # the other role answers the closing label once more before the end
    closing_reason: str = "student_stop"  # the conversation's end_reason when the closing label ends it
    # the other role's labels that end the conversation at once, each with its end_reason (Frames' book)
    other_closings: tuple[tuple[str, str], ...] = ()
    max_response_chars: int = 2000
    # a worker writes at most one conversation of a task in a batch (annotation: the replicas of one turn are
    # conversations of one task, each labelled by a different annotator)
    distinct_writers: bool = False
    # whom a conversation's next turn of a role goes to by default (Batch.keep, a KeepRule): the paper's rule;
    # STAR, Frames and MEEP were collected with one user and one wizard per dialog (STAR 3.1, Frames 3.2, MEEP 5.2)
    keeps: str = "any"

    def form(self, role: str) -> RoleForm:
        return self.roles[role]

    def next_role(self, role: str) -> str:
        """The other role; a protocol of one role (a comparison's judge) follows itself."""
        others = [r for r in self.roles if r != role]
        return others[0] if others else role


def _not_first(ctx: TurnContext) -> bool:
    return ctx.index > 0


def _urls_required(ctx: TurnContext, answers: dict) -> bool:
    return answers.get("action") == "answer_external"


TEACHER = RoleForm(
    role="teacher",
    title="Teacher: help the student complete the task",
    sees_document=True,
    paste_blocked=True,
    guidelines=(
        "You are an expert who guides the student through the task described in the document.",
        "Read the whole chat: other teachers may have written earlier turns. Continue naturally.",
        "Answer the student's last message. Use the document; if it does not say, you may use "
        "common sense or a web search, and then give the URL you used.",
        "Tick document items (steps, ingredients/tools, images) to show them to the student.",
        "Write your own words: pasting is disabled and copied document text is flagged.",
    ),
    questions=(
        Question("relevant", "Is the last student message relevant and coherent to the conversation history?",
                 "yes_no", YES_NO, is_rating=True),
        Question("useful", "Is the last student message useful for proceeding to the next steps?",
                 "yes_no", YES_NO, is_rating=True),
        Question("action", "What is the action of your message?", "choice", (
            ("return_items", "Return the ingredients/tools list"),
            ("return_step", "Return the next (or previous) step"),
            ("answer_document", "Answer a question from the task document"),
            ("answer_external", "Answer a question using external knowledge"),
            ("ask_question", "Ask the student a question"),
            ("chit_chat", "Chit-chat"),
            ("other", "Other"),
        ), is_label=True),
        Question("urls", "External URL(s) used, one per line", "urls",
                 help="Required when you answer with external knowledge.", required=_urls_required),
        Question("shared", "Content to share with the student", "multi_items", items="shareable",
                 required=lambda ctx, answers: False),
        Question("response", "Your response to the student", "text", is_response=True),
    ),
)

STUDENT = RoleForm(
    role="student",
    title="Student: learn how to do the task",
    sees_document=False,
    guidelines=(
        "You are a curious learner who wants to complete the task named in the title.",
        "Read the whole chat: other students may have written earlier turns. Continue naturally.",
        "Ask about the ingredients/tools or the next step; ask at least one open question about the "
        "current step before moving to the next one.",
        "When the task is done, choose the intent Stop and say goodbye.",
    ),
    questions=(
        Question("relevant", "Is the last teacher message relevant and coherent to the chat history?",
                 "yes_no", YES_NO, asked=_not_first, is_rating=True),
        Question("useful", "Is the last teacher message useful for proceeding to the next steps?",
                 "yes_no", YES_NO, asked=_not_first, is_rating=True),
        Question("danger", "Which shared content, if any, could cause harm to people or property damage?",
                 "multi_items", items="shared_so_far", asked=_not_first,
                 required=lambda ctx, answers: False, help="Leave all unticked for none."),
        Question("real_life", "What would you do in real life if you were doing the task?", "text",
                 asked=_not_first, help="For example: walk to the fridge, take a pear and start cutting it."),
        Question("intent", "What is the intent of your response?", "choice", (
            ("request_items", "Request the ingredients/tools"),
            ("request_step", "Request the next (or previous) step"),
            ("question_items", "Ask a question about the ingredients/tools"),
            ("question_step", "Ask a question about a step"),
            ("stop", "Stop: the task is done"),
            ("chit_chat", "Chit-chat"),
            ("other", "Other"),
        ), is_label=True),
        Question("response", "Your message to the teacher", "text", is_response=True),
    ),
)

WIZARD_OF_TASKS = Protocol(
    name="wizard_of_tasks",
    first_role="student",
    roles={"student": STUDENT, "teacher": TEACHER},
    closing_label="stop",
)

# ---- the event-logged protocols: STAR, Frames and MEEP -------------------------------------------------
# Their user says one message a turn and may end the dialog with it; their wizard's turn ends in a reply.

USER_ACTIONS = ("utter", "complete")
SAY_OR_END = Question("intent", "What do you do?", "choice", (
    ("utter", "Send a message"),
    ("complete", "Send a message and end the dialog"),
), is_label=True)
MESSAGE_TO_ASSISTANT = Question("response", "Your message to the assistant", "text", is_response=True)
REPLY_TO_USER = Question("response", "Your reply to the user", "text", is_response=True)


def logged_protocol(name: str, user: RoleForm, wizard: RoleForm,
                    wizard_closings: tuple[tuple[str, str], ...] = ()) -> Protocol:
    """The user writes first and ends the dialog (``complete``); the wizard does not reply after it. A
    wizard's label in ``wizard_closings`` ends it too (Frames' booking)."""
    return Protocol(name=name, first_role="user", roles={"user": user, "wizard": wizard},
                    closing_label="complete", closing_reply=False, closing_reason="user_complete",
                    other_closings=wizard_closings, keeps="session")


# ---- STAR (Mosig, Mehri and Kober 2020) ---------------------------------------------------------------
# A dialog is STAR's event log (turkflow.protocols.star.dialog records it): a user's turn is an utter, perhaps
# followed by complete; a wizard's turn is any number of select_task, query (the knowledge base answers
# with a return_item), select_primary/select_secondary (an item of a query's matches) and
# request_suggestions, ending in one pick_suggestion or utter.

# STAR's end-of-dialog questionnaires, worded as its dialogues/*.json log them (the user's first question
# names the task, "Did the AI Assistant book your flight?": star.dialog.survey_wording words it per dialog).
STAR_USER_SURVEY = (
    Question("task_done", "Did the assistant get your task done?", "yes_no", YES_NO, claims_success=True),
    Question("calm", "Did the assistant stay calm and helpful throughout the dialogue?", "yes_no", YES_NO),
)
STAR_WIZARD_SURVEY = (
    Question("changed_mind", "Did the user change his/her mind about what he/she wants at any time?",
             "yes_no", YES_NO),
    Question("aggressive", "Did the user become aggressive or annoyed during the dialogue? "
             "(Note: some users may be instructed to be annoying.)", "yes_no", YES_NO),
    Question("unsure", "Where you unsure about what to do at any time? (Feel free to send us an email with "
             "details.)", "yes_no", YES_NO),  # STAR's words, its spelling too: exports compare them
)

STAR_USER = RoleForm(
    role="user",
    title="User: get your task done with the assistant",
    sees_document=False,
    sees=("scenario", "nudges"),
    actions=USER_ACTIONS,
    guidelines=(
        "Follow your scenario: it says what you want and how you behave.",
        "Read the whole chat: other users may have written earlier turns. Continue naturally.",
        "Follow the instructions that appear during the dialog.",
        "When your task is done (or cannot be done), end the dialog with Complete.",
    ),
    questions=(SAY_OR_END, MESSAGE_TO_ASSISTANT),
    survey=STAR_USER_SURVEY,
)

STAR_WIZARD = RoleForm(
    role="wizard",
    title="Wizard: help the user as the flow chart says",
    sees_document=True,
    sees=("flow_chart", "knowledge_base", "suggestions"),
    actions=("select_task", "query", "select_primary", "select_secondary", "request_suggestions",
             "pick_suggestion", "utter"),
    guidelines=(
        "Follow the task's flow chart. Ask for what the knowledge base needs, then query it.",
        "The user does not see the knowledge base or its results: tell them what they need.",
        "Pick a suggested reply when one fits; write your own only when none does.",
    ),
    questions=(
        Question("action", "How do you reply?", "choice", (
            ("pick_suggestion", "With a suggested reply"),
            ("utter", "With my own words"),
        ), is_label=True),
        REPLY_TO_USER,
    ),
    survey=STAR_WIZARD_SURVEY,
)

STAR = logged_protocol("star", STAR_USER, STAR_WIZARD)

# ---- Frames (El Asri et al. 2017) -----------------------------------------------------------------------
# The user pursues a generated goal that may fail; the wizard searches the requester's database (each search,
# its results and any suggestions are events, turkflow.protocols.frames.dialog) and writes the reply. At the end the user
# rates the wizard's cooperativity and the wizard, shown the goal, says whether the user reached it.

RATING = tuple((str(n), str(n)) for n in range(1, 6))
FRAMES_USER = RoleForm(
    role="user",
    title="User: reach your goal with the assistant",
    sees_document=False,
    sees=("goal",),
    actions=USER_ACTIONS,
    guidelines=(
        "Your goal says what you want. Find out whether the assistant can offer it.",
        "Read the whole chat: other users may have written earlier turns. Continue naturally.",
        "If nothing fits, follow what your goal says to do then: change it, or end the dialog.",
        "When you want a package, ask the assistant to book it: their booking ends the dialog.",
        "If there is nothing for you, end the dialog yourself.",
    ),
    questions=(SAY_OR_END, MESSAGE_TO_ASSISTANT),
    survey=(Question("cooperativity", "How cooperative was the assistant? (1: not at all, 5: very)", "rating",
                     RATING),),
)
FRAMES_WIZARD = RoleForm(
    role="wizard",
    title="Wizard: search the database and help the user",
    sees_document=True,
    sees=("search",),
    actions=("search", "book", "utter"),
    guidelines=(
        "Search the database for what the user asks; the user does not see it: tell them what they need.",
        "When nothing matches, say so; offer a suggestion when the search shows one.",
        "When the user wants a package you found, book it and tell them: booking ends the dialog.",
        "Read the whole chat: other wizards may have written earlier turns. Continue naturally.",
    ),
    questions=(
        Question("action", "How do you reply?", "choice", (("utter", "With my own words"),
                                                          ("book", "I booked a package; this ends the dialog")),
                 is_label=True),
        REPLY_TO_USER,
    ),
    survey=(Question("goal_reached", "This was the user's goal. Do you think the user reached it?", "yes_no",
                     YES_NO),),
)
FRAMES = logged_protocol("frames", FRAMES_USER, FRAMES_WIZARD, wizard_closings=(("book", "wizard_booked"),))

# ---- MEEP (Arkhangorodsky et al. 2020) -----------------------------------------------------------------
# The user types; the agent (a wizard) only clicks: it calls APIs with arguments clicked from the user's words
# or earlier results, and replies with utterance templates whose blanks it fills the same way. Every click is
# an event (turkflow.protocols.meep.dialog) and the log can be executed again (turkflow replay). The agent may
# add a template ("+", every agent of the batch sees it); it ends the dialog by calling start_driving, and the
# user's last turn approves or disapproves the destination shown on a map (judge), MEEP's success label.

MEEP_USER = RoleForm(
    role="user",
    title="User: get where you want to go with the agent",
    sees_document=False,
    sees=("goal", "destination"),
    actions=("utter", "judge", "complete"),
    guidelines=(
        "Your goal says where you want to go. Tell the agent in your own words.",
        "Read the whole chat: other users may have written earlier turns. Continue naturally.",
        "When the agent starts driving, you see the destination on a map: approve it or disapprove it.",
        "If the agent cannot find your destination, end the dialog.",
    ),
    questions=(SAY_OR_END, Question("response", "Your message to the agent", "text", is_response=True)),
)
MEEP_AGENT = RoleForm(
    role="wizard",
    title="Agent: help the user by clicking",
    sees_document=True,
    sees=("tokens", "apis", "templates"),
    actions=("call_api", "add_template", "pick_template", "send"),
    guidelines=(
        "You cannot type: click the user's words or earlier results to fill API arguments and replies.",
        "Call an API when you need facts; its results appear in the panel, ready to click.",
        "Pick one or more reply templates, fill their blanks by clicking, and send.",
        "No template says it? Make one with +: click words and blanks; every agent sees it from then on.",
        "When the user agrees, call start_driving with the place's latitude and longitude, and say so.",
    ),
    questions=(
        Question("action", "How do you reply?", "choice", (("send", "With the templates I filled"),),
                 is_label=True),
        REPLY_TO_USER,
    ),
)
MEEP = logged_protocol("meep", MEEP_USER, MEEP_AGENT)

# ---- Annotation (Frames' second stage, and any protocol's) ------------------------------------------------
# An annotator labels one collected turn, shown in its dialogue, with a scheme's acts, slots and values (and for
# Frames the frames it creates, refers to, reads or writes), by clicks logged as events
# (turkflow.protocols.annotate.dialog); each replica of a turn is a one-turn conversation that its label ends.

ANNOTATOR = RoleForm(
    role="annotator",
    title="Annotator: label a turn of a dialogue",
    sees_document=False,
    sees=("dialogue", "scheme"),
    actions=("label", "frame", "clear"),
    guidelines=(
        "Read the dialogue up to the highlighted turn; label only the highlighted turn.",
        "Add each dialogue act the turn performs. For a slot, pick its value by clicking the turn's words or "
        "a listed value.",
        "Say which frame the turn creates, refers to, reads from or writes to, if any.",
        "A turn may carry no act: submit it without labels.",
    ),
    questions=(
        Question("label", "Labels", "choice", (("labelled", "Labelled"),), is_label=True),
        Question("response", "The labels, as the scheme writes them", "text", is_response=True),
    ),
)
ANNOTATE = Protocol(name="annotate", first_role="annotator", roles={"annotator": ANNOTATOR},
                    closing_label="labelled", closing_reply=False, closing_reason="labelled",
                    distinct_writers=True)

# ---- judging an agent (the DSTC8 and DSTC9 human evaluations) ------------------------------------------
# Asked at the end of a dialog in which an agent played the other role, of the person who talked to it, after the
# role's own questions: did it get the task done (the dialog's claimed success, beside the success checked against
# the goal), how well it understood and how appropriate its replies were (DSTC's two 1-5 scales), overall
# satisfaction, and why. The partner is named as the person's page names the role, never as the agent.

SURVEY_TEXT_CHARS = 1000
PARTNERS = {"teacher": "teacher", "student": "student", "user": "user", "wizard": "assistant"}
PARTNER_OF = {("meep", "wizard"): "agent"}  # MEEP's pages call its wizard the agent


def partner_name(protocol: Protocol, role: str) -> str:
    """How ``role``'s pages name the other role."""
    other = protocol.next_role(role)
    return PARTNER_OF.get((protocol.name, other), PARTNERS.get(other, other))


def evaluation_survey(protocol: Protocol, role: str) -> tuple[Question, ...]:
    """The questions a person of ``role`` answers about an agent that played the other role. A role whose own
    survey asks whether the task was done (STAR's user) is not asked it twice."""
    partner = partner_name(protocol, role)
    done = (f"Did the {partner} complete your task?" if role == protocol.first_role
            else f"Was the {partner}'s task completed in this dialog?")
    asked = (
        Question("completed", done, "yes_no", YES_NO, claims_success=True),
        Question("understanding", f"How well did the {partner} understand you? (1: not at all, 5: completely)",
                 "rating", RATING),
        Question("appropriateness", f"How appropriate were the {partner}'s replies? (1: not at all, "
                 "5: completely)", "rating", RATING),
        Question("satisfaction", f"Overall, how satisfied are you with the {partner}? (1: not at all, 5: very)",
                 "rating", RATING),
        Question("reason", "Why? In a sentence or two: what went well, what went wrong.", "text"),
    )
    claimed = any(q.claims_success for q in protocol.form(role).survey)
    return tuple(q for q in asked if not (claimed and q.claims_success))


EVALUATION_RATINGS = ("understanding", "appropriateness", "satisfaction")  # the 1-5 scales, as the report names them


# ---- Side by side (ACUTE-Eval's comparison of two whole dialogs) ---------------------------------------------
# A judge reads two finished dialogs of the same task, side by side, and says which assistant they would rather
# talk to (or that neither), with a short reason; each judgement is a one-turn conversation of the comparison
# batch (turkflow.protocols.compare.dialog), the pair chosen when the judge opens it and logged as an event.

# Dialog A is on the left on a wide screen and above on a phone; the answers keep the sides' names.
CHOICES = (("left", "Dialog A"), ("right", "Dialog B"), ("tie", "Neither: they are about the same"))
JUDGE = RoleForm(
    role="judge",
    title="Judge: compare two dialogs",
    sees_document=False,
    sees=("pair",),  # logged by the server as the judge's "shown" event when their page first opens
    guidelines=(
        "Read both dialogs to the end: they are about the same task.",
        "Answer the question about the assistants, not about the people they talked to.",
        "Say which one you prefer, or that they are about the same, and why in a few words.",
        "Some pairs have a clear answer: they check that judges read both dialogs.",
    ),
    questions=(
        Question("choice", "Which one?", "choice", CHOICES),
        # set by the server: a vote ends its conversation; a known-answer pair ("checked") opens a fresh unit
        Question("verdict", "Verdict", "choice", (("judged", "Judged"), ("checked", "Checked")), is_label=True),
        Question("response", "Why? (a few words)", "text", is_response=True),
    ),
)
COMPARE = Protocol(name="compare", first_role="judge", roles={"judge": JUDGE}, closing_label="judged",
                   closing_reply=False, closing_reason="judged", max_response_chars=500)

PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (WIZARD_OF_TASKS, STAR, FRAMES, MEEP, ANNOTATE, COMPARE)}
# every protocol's roles: Wizard of Tasks' student and teacher, the others' user and wizard
ROLES = tuple(dict.fromkeys(role for protocol in PROTOCOLS.values() for role in protocol.roles))


def get_protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}") from None


# ---- documents as shareable items -------------------------------------------------------------------


def document_items(task: Task) -> list[dict[str, Any]]:
    """Every piece of a task document a teacher can share, with a stable id the answers refer to."""
    entries: list[dict[str, Any]] = []
    if task.image_url:
        entries.append({"id": "image", "kind": "image", "text": task.title, "image_url": task.image_url})
    if task.summary:
        entries.append({"id": "summary", "kind": "summary", "text": task.summary})
    for i, item in enumerate(task.items):
        entries.append({"id": f"item-{i + 1}", "kind": "item", "text": item})
    for i, step in enumerate(task.steps):
        entries.append({"id": f"step-{i + 1}", "kind": "step", "text": f"Step {i + 1}: {step['text']}"})
        if step.get("image_url"):
            entries.append({"id": f"step-{i + 1}-image", "kind": "image",
                            "text": f"Image of step {i + 1}", "image_url": step["image_url"]})
    return entries


def document_text(task: Task) -> str:
    return "\n".join([task.summary, *task.items, *(s["text"] for s in task.steps)])


# ---- validation -------------------------------------------------------------------------------------

_URL_SPLIT = re.compile(r"[\s,]+")
MAX_VALUES = 200  # values one field may carry (a form field repeated, a JSON list)
MAX_URLS = 10
MAX_URL_CHARS = 2000
_KEPT_CONTROLS = "\n\t"


# Characters that show as blank space though Unicode gives some of them a letter's category (the Hangul
# fillers are Lo): text made of them, like text made of marks alone, says nothing.
FILLERS = "\u115f\u1160\u3164\uffa0\u2800"  # Hangul choseong, jungseong, hangul, halfwidth fillers; Braille blank
# A letter or digit of some script (categories L* and N*: Python's \w less the underscore), fillers aside.
# test_text_rule checks it against that definition for every code point.
_WORD = re.compile(f"[^\\W_{FILLERS}]+")
NO_WORDS = "write some words: a letter or a digit, not only marks, symbols or invisible characters"


def words_of(text: str) -> list[str]:
    """The runs of letters and digits in ``text``: what the rule and the content checks count as words."""
    return _WORD.findall(text)


def has_words(text: str) -> bool:
    """The rule on text a person writes: it holds a letter or a digit of some script. Format characters,
    combining marks, emoji modifiers, variation selectors, tag characters and ``FILLERS`` make none."""
    return _WORD.search(text) is not None


def clean_text(value: str, field: str | None = None) -> str:
    """Text as stored, the same on every database: Unicode NFC, one kind of line break, invisible edges
    (whitespace, zero-width characters, BOMs, NULs) trimmed, so invisible-only text is empty.

    Raises ``InvalidInput`` naming ``field`` for control characters and lone surrogates, which PostgreSQL
    refuses to store and SQLite would store as they are, and for text left without words (``has_words``):
    two combining accents or a Hangul filler would otherwise be stored, and paid, as an answer. Every field
    a person writes goes through here, so the rule holds on every protocol's pages; empty text is the
    caller's to allow or refuse ("this answer is required").
    """
    text = unicodedata.normalize("NFC", value.replace("\r\n", "\n").replace("\r", "\n"))
    start, end = 0, len(text)
    while start < end and _invisible(text[start]):
        start += 1
    while end > start and _invisible(text[end - 1]):
        end -= 1
    text = text[start:end]
    for char in text:
        category = unicodedata.category(char)
        if category == "Cs":
            raise InvalidInput("this text is not valid Unicode", field)
        if category == "Cc" and char not in _KEPT_CONTROLS:
            raise InvalidInput(f"remove the control character U+{ord(char):04X}", field)
    if text and not has_words(text):
        raise InvalidInput(NO_WORDS, field)
    return text


def _invisible(char: str) -> bool:
    return char.isspace() or char == "\x00" or unicodedata.category(char) in ("Cf", "Zs")


def validate_answers(protocol: Protocol, ctx: TurnContext, raw: dict[str, Any]) -> dict[str, Any]:
    """Check raw answers against the role's questions and return the clean answers.

    ``raw`` is a form (each field a list of strings) or a JSON object (a string or a list of strings per
    field); any other type is refused, never turned into text. Raises ``InvalidAnswer`` naming the first
    offending question. Questions not asked on this turn are dropped, so the stored answers are exactly
    what the worker was shown.
    """
    form = protocol.form(ctx.role)
    clean: dict[str, Any] = {}
    for q in form.questions_for(ctx):
        values = _strings(q, raw.get(q.name))
        if q.kind == "yes_no":
            value = _single(q, values)
            if value not in ("yes", "no"):
                raise InvalidAnswer(q.name, "answer yes or no")
            clean[q.name] = value == "yes"
        elif q.kind == "choice":
            value = _single(q, values)
            allowed = [key for key, _ in q.options]
            if value not in allowed:
                raise InvalidAnswer(q.name, f"choose one of: {', '.join(allowed)}")
            clean[q.name] = value
        elif q.kind == "multi_items":
            chosen = [v for v in values if v.strip()]
            allowed = set(ctx.shareable if q.items == "shareable" else ctx.shared_so_far)
            unknown = [c for c in chosen if c not in allowed]
            if unknown:
                raise InvalidAnswer(q.name, f"unknown item(s): {', '.join(u[:40] for u in unknown[:5])}")
            clean[q.name] = sorted(set(chosen), key=chosen.index)
        elif q.kind == "urls":
            clean[q.name] = _urls(q, values)
        elif q.kind == "text":
            # no shortest length: "5" and "好" are answers, and ``clean_text`` refuses text without words
            text = _text(q, _single(q, values) or "")
            if len(text) > protocol.max_response_chars:
                raise InvalidAnswer(q.name, f"write at most {protocol.max_response_chars} characters")
            clean[q.name] = text
        else:  # pragma: no cover - a protocol definition error, caught by the protocol tests
            raise ValueError(f"unknown question kind {q.kind}")
    for q in form.questions_for(ctx):
        if q.required(ctx, clean) and clean.get(q.name) in (None, "", []):
            raise InvalidAnswer(q.name, "this answer is required")
    return clean


def validate_survey(questions: Sequence[Question], raw: dict[str, Any]) -> dict[str, Any]:
    """A role's end-of-dialog answers, every one required: a yes/no question's as a bool, a rating's as its
    number, a text's as clean text of at most ``SURVEY_TEXT_CHARS``; a field that is not a question of the
    survey is refused too, naming it."""
    if not questions:
        raise InvalidAnswer("role", "you have no questions to answer about this dialog")
    asked = {q.name for q in questions}
    unknown = sorted(name for name in raw if name not in asked)
    if unknown:
        raise InvalidAnswer(unknown[0][:60], "not a question of this survey")
    clean: dict[str, Any] = {}
    for q in questions:
        given = raw.get(q.name)
        if q.kind == "text":
            text = _text(q, _single(q, _strings(q, given)) or "")
            if not text:
                raise InvalidAnswer(q.name, "this answer is required")
            if len(text) > SURVEY_TEXT_CHARS:
                raise InvalidAnswer(q.name, f"write at most {SURVEY_TEXT_CHARS} characters")
            clean[q.name] = text
            continue
        if isinstance(given, bool):  # a JSON client's true/false
            given = "yes" if given else "no"
        if q.kind == "rating" and isinstance(given, int) and not isinstance(given, bool):
            given = str(given)  # a JSON client's number
        value = _single(q, _strings(q, given))
        allowed = [key for key, _ in q.options]
        if value not in allowed:
            raise InvalidAnswer(q.name, "answer yes or no" if q.kind == "yes_no"
                                else f"choose one of: {', '.join(allowed)}")
        clean[q.name] = value == "yes" if q.kind == "yes_no" else int(value)
    return clean


def _strings(q: Question, value: Any) -> list[str]:
    """The strings a field was given: none, one, or a list of them (a repeated form field, a JSON list)."""
    if value is None:
        return []
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(v, str) for v in values):
        listed = q.kind in ("multi_items", "urls")
        raise InvalidAnswer(q.name, "expected text or a list of texts" if listed else "expected text")
    if len(values) > MAX_VALUES:
        raise InvalidAnswer(q.name, f"send at most {MAX_VALUES} values")
    return values


def _single(q: Question, values: list[str]) -> str | None:
    """The one answer of a single-answer question; sent twice is refused, not silently reduced to one."""
    if len(values) > 1:
        raise InvalidAnswer(q.name, "answer once")
    return values[0] if values else None


def _text(q: Question, value: str) -> str:
    try:
        return clean_text(value)
    except InvalidInput as error:
        raise InvalidAnswer(q.name, error.reason) from None


def _urls(q: Question, values: list[str]) -> list[str]:
    urls = [u for u in _URL_SPLIT.split(_text(q, "\n".join(values))) if u]
    if len(urls) > MAX_URLS:
        raise InvalidAnswer(q.name, f"give at most {MAX_URLS} web addresses")
    for url in urls:
        parsed = urlparse(url)
        if (parsed.scheme not in ("http", "https") or not parsed.netloc or len(url) > MAX_URL_CHARS
                or any(unicodedata.category(c)[0] in "CZ" for c in url)):
            raise InvalidAnswer(q.name, f"not a web address: {url[:80]}")
    return urls

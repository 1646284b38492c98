"""Who may take an MTurk turn HIT: our qualification types (each role's onboarding test, the soft block),
MTurk's system qualifications on the live marketplace, and each role's quiz as a QuestionForm test.

A worker gets a role by passing its qualification test, the role's onboarding quiz (``turkflow.hits.onboarding``)
which MTurk grades with the answer key written here: the qualification's value is the score in percent, and
turn HITs require at least the pass mark.

STAR's workers qualify in stages (``turkflow.protocols.star.stages``): one qualification type per role and stage
(``star:user:1`` ...), whose test is the stage's quiz. MTurk's test form cannot count hints, so it offers
none (none used is within the budget) and a STAR turn HIT requires the score of 100 that the stage's grading
asks for: stage 1 for a single-task conversation, stages 1 and 2 for a multi-task one (MTurk cannot hold a
test back until another is passed, so stage 2 alone unlocks nothing), never the other role's stage 1.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from sqlmodel import Session, select

from turkflow.config import Settings
from turkflow.hits.mturk.api import QualificationsMissing
from turkflow.protocols.star import stages
from turkflow.hits.onboarding import Quiz, QuizQuestion, quiz_for
from turkflow.models import MTurkQualification, Role

PURPOSES = ("role:student", "role:teacher", "blocked")
STAR_PURPOSES = tuple(f"star:{role}:{number}" for role in stages.ROLES
                      for number in (stages.SINGLE_TASK, stages.MULTI_TASK)) + ("blocked",)
# MTurk's system qualification types (the same ids on the sandbox and the live marketplace).
PERCENT_APPROVED = "000000000000000000L0"
NUMBER_APPROVED = "00000000000000000040"
LOCALE = "00000000000000000071"

QUESTION_FORM_NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/QuestionForm.xsd"
ANSWER_KEY_NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/AnswerKey.xsd"


def purposes_for(protocol: str) -> tuple[str, ...]:
    """The qualification types a batch of this protocol needs."""
    return STAR_PURPOSES if protocol == "star" else PURPOSES


def qualification_requirements(settings: Settings, quals: dict[str, str], role: str, live: bool,
                               stage: int = stages.SINGLE_TASK) -> list[dict]:
    """Who may take a turn of this role: passed its onboarding test (a STAR role: every stage up to
    ``stage``, the one its conversation needs), never took the other role's, not blocked; on the live
    marketplace also the system requirements (sandbox workers have no history)."""
    hidden = "DiscoverPreviewAndAccept"
    if stages.has_stages(role):
        other = next(r for r in stages.ROLES if r != role)
        requirements = [{"QualificationTypeId": quals[f"star:{role}:{number}"], "Comparator": "EqualTo",
                         "IntegerValues": [100], "ActionsGuarded": "Accept"}
                        for number in range(stages.SINGLE_TASK, stage + 1)]
        requirements.append({"QualificationTypeId": quals[f"star:{other}:{stages.SINGLE_TASK}"],
                             "Comparator": "DoesNotExist", "ActionsGuarded": hidden})
    else:
        other = next(r for r in (Role.student, Role.teacher) if r != role)
        requirements = [
            {"QualificationTypeId": quals[f"role:{role}"], "Comparator": "GreaterThanOrEqualTo",
             "IntegerValues": [settings.onboarding_pass_percent], "ActionsGuarded": "Accept"},
            {"QualificationTypeId": quals[f"role:{other}"], "Comparator": "DoesNotExist",
             "ActionsGuarded": hidden},
        ]
    requirements.append({"QualificationTypeId": quals["blocked"], "Comparator": "DoesNotExist",
                         "ActionsGuarded": hidden})
    if not live:
        return requirements
    if settings.mturk_min_approval_rate > 0:
        requirements.append({"QualificationTypeId": PERCENT_APPROVED, "Comparator": "GreaterThanOrEqualTo",
                             "IntegerValues": [settings.mturk_min_approval_rate], "ActionsGuarded": hidden})
    if settings.mturk_min_approved_hits > 0:
        requirements.append({"QualificationTypeId": NUMBER_APPROVED, "Comparator": "GreaterThanOrEqualTo",
                             "IntegerValues": [settings.mturk_min_approved_hits], "ActionsGuarded": hidden})
    countries = [c.strip().upper() for c in settings.mturk_locales.split(",") if c.strip()]
    if countries:
        requirements.append({"QualificationTypeId": LOCALE, "Comparator": "In",
                             "LocaleValues": [{"Country": c} for c in countries], "ActionsGuarded": hidden})
    return requirements


def qualification_ids(session: Session, live: bool, protocol: str = "wizard_of_tasks") -> dict[str, str]:
    """Our qualification type ids on one marketplace; publishing a protocol's turns needs all of its."""
    ours = session.exec(select(MTurkQualification).where(MTurkQualification.live == live))
    found = {q.purpose: q.type_id for q in ours}
    missing = [p for p in purposes_for(protocol) if p not in found]
    if missing:
        marketplace = "live marketplace" if live else "sandbox"
        star = " --protocol star" if protocol == "star" else ""
        command = f"turkflow mturk quals{' --live' if live else ''}{star}"
        raise QualificationsMissing(f"the MTurk {marketplace} has no turkflow qualification types yet "
                                    f"({', '.join(missing)}); run `{command}`")
    return found


def qualification_names(study: str) -> dict[str, tuple[str, str]]:
    """Name and description of each qualification type; the study name keeps installs apart."""
    return {
        "role:student": (f"{study}: student", "Passed the student onboarding test of this chat study. A worker "
                                              "plays one role (student or teacher) for the whole study."),
        "role:teacher": (f"{study}: teacher", "Passed the teacher onboarding test of this chat study. A worker "
                                              "plays one role (student or teacher) for the whole study."),
        "blocked": (f"{study}: paused", "Temporarily not eligible for this study's HITs while the requester "
                                        "reviews recent work."),
        **{f"star:{s.role}:{s.number}": (f"{study}: STAR {s.role} stage {s.number}",
                                         f"Passed the quiz of {s.title}; unlocks {s.unlocks}. A worker plays "
                                         "one role (user or wizard) for the whole study.")
           for s in stages.STAGES.values()},
    }


def quiz_of(purpose: str) -> Quiz:
    """The quiz a qualification type tests: a Wizard of Tasks role's onboarding quiz, or a STAR stage's
    (as MTurk's test form shows it: the questions and options, no hints)."""
    if purpose.startswith("star:"):
        _, role, number = purpose.split(":")
        stage = stages.stage_for(role, int(number))
        questions = tuple(QuizQuestion(q.name, q.text, q.options, q.answer) for q in stage.questions)
        intro = " ".join(stage.tutorial) + " Every answer must be right."
        return Quiz(role=role, title=stage.title, intro=intro, questions=questions)
    return quiz_for(purpose.removeprefix("role:"))


# ---- a role's quiz as its qualification test -----------------------------------------------------------


def question_form_xml(quiz: Quiz) -> str:
    """The quiz as an MTurk QuestionForm (radio buttons), the ``Test`` of the role's qualification type."""
    parts = [f'<QuestionForm xmlns="{QUESTION_FORM_NS}">',
             f"<Overview><Title>{escape(quiz.title)}</Title><Text>{escape(quiz.intro)}</Text></Overview>"]
    for q in quiz.questions:
        selections = "".join(
            f"<Selection><SelectionIdentifier>{escape(key)}</SelectionIdentifier><Text>{escape(label)}</Text>"
            "</Selection>" for key, label in q.options)
        parts.append(
            f"<Question><QuestionIdentifier>{escape(q.name)}</QuestionIdentifier><IsRequired>true</IsRequired>"
            f"<QuestionContent><Text>{escape(q.text)}</Text></QuestionContent>"
            "<AnswerSpecification><SelectionAnswer><StyleSuggestion>radiobutton</StyleSuggestion>"
            f"<Selections>{selections}</Selections></SelectionAnswer></AnswerSpecification></Question>")
    parts.append("</QuestionForm>")
    return "".join(parts)


def answer_key_xml(quiz: Quiz) -> str:
    """The answer key: one point per right answer, the qualification value is the percentage."""
    parts = [f'<AnswerKey xmlns="{ANSWER_KEY_NS}">']
    for q in quiz.questions:
        parts.append(f"<Question><QuestionIdentifier>{escape(q.name)}</QuestionIdentifier><AnswerOption>"
                     f"<SelectionIdentifier>{escape(q.answer)}</SelectionIdentifier><AnswerScore>1</AnswerScore>"
                     "</AnswerOption></Question>")
    parts.append("<QualificationValueMapping><PercentageMapping>"
                 f"<MaximumSummedScore>{len(quiz.questions)}</MaximumSummedScore>"
                 "</PercentageMapping></QualificationValueMapping></AnswerKey>")
    return "".join(parts)

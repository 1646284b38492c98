"""Who may take an MTurk turn HIT: our qualification types (each role's onboarding test, the soft block),
MTurk's system qualifications on the live marketplace, and each role's quiz as a QuestionForm test.

A worker gets a role by passing its qualification test, the role's onboarding quiz (``turkflow.hits.onboarding``)
which MTurk grades with the answer key written here: the qualification's value is the score in percent, and
turn HITs require at least the pass mark.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from sqlmodel import Session, select

from turkflow.config import Settings
from turkflow.hits.mturk.api import QualificationsMissing
from turkflow.hits.onboarding import Quiz
from turkflow.models import MTurkQualification, Role

PURPOSES = ("role:student", "role:teacher", "blocked")
# MTurk's system qualification types (the same ids on the sandbox and the live marketplace).
PERCENT_APPROVED = "000000000000000000L0"
NUMBER_APPROVED = "00000000000000000040"
LOCALE = "00000000000000000071"

QUESTION_FORM_NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/QuestionForm.xsd"
ANSWER_KEY_NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/AnswerKey.xsd"


def qualification_requirements(settings: Settings, quals: dict[str, str], role: str, live: bool) -> list[dict]:
    """Who may take a turn of this role: passed its onboarding test, never took the other role's, not
    blocked; on the live marketplace also the system requirements (sandbox workers have no history)."""
    other = next(r for r in (Role.student, Role.teacher) if r != role)
    hidden = "DiscoverPreviewAndAccept"
    requirements = [
        {"QualificationTypeId": quals[f"role:{role}"], "Comparator": "GreaterThanOrEqualTo",
         "IntegerValues": [settings.onboarding_pass_percent], "ActionsGuarded": "Accept"},
        {"QualificationTypeId": quals[f"role:{other}"], "Comparator": "DoesNotExist", "ActionsGuarded": hidden},
        {"QualificationTypeId": quals["blocked"], "Comparator": "DoesNotExist", "ActionsGuarded": hidden},
    ]
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


def qualification_ids(session: Session, live: bool) -> dict[str, str]:
    """Our qualification type ids on one marketplace; publishing needs all of them."""
    ours = session.exec(select(MTurkQualification).where(MTurkQualification.live == live))
    found = {q.purpose: q.type_id for q in ours}
    missing = [p for p in PURPOSES if p not in found]
    if missing:
        marketplace = "live marketplace" if live else "sandbox"
        raise QualificationsMissing(f"the MTurk {marketplace} has no turkflow qualification types yet "
                                    f"({', '.join(missing)}); run `turkflow mturk quals{' --live' if live else ''}`")
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
    }


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

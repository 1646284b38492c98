"""What STAR's booking and checking APIs answer, and ``call``: one entry point for every STAR API.

Search APIs return database rows (``KnowledgeBase.query``). The others (book a doctor, check a venue, report
fraud...) answered with a message STAR's server drew at random, echoing some of the request. Here the draw
is made by a ``random.Random`` the caller may pass (a scenario that wants the unhappy path can force it
through :func:`possible`); without one it is seeded by the request, so the same request gets the same
answer. The messages are STAR's own wording, so suggestions and the export read like the dataset.
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from turkflow.errors import InvalidInput
from turkflow.protocols.star.kb import Constraint, ConstraintInput, KnowledgeBase, OPS, QueryResult

AVAILABLE, UNAVAILABLE = "Available", "Unavailable"
CONFIRMED, FAILED = "Reservation Confirmed", "Reservation Failed"
SLOT_FREE = "The time slot is available."
AUTH_MISSING = ("You must provide either AccountNumber/FullName/PIN or FullName/DateOfBirth/SecurityAnswer1/"
                "SecurityAnswer2. We cannot authenticate the user otherwise.")
AUTH_SETS = (("AccountNumber", "FullName", "PIN"), ("FullName", "SecurityAnswer1", "SecurityAnswer2",
                                                     "DateOfBirth"))
DOCUMENTS = ("Passport", "Proof of Income", "SCHUFA certificate", "Bank Statement")


@dataclass(frozen=True)
class Rule:
    """An outcome API: which request fields it echoes (output name -> input field) and its possible answers
    for a check and for a booking, each with the weight STAR gave it."""

    echo: Mapping[str, str] = field(default_factory=dict)
    check: tuple[tuple[Mapping[str, Any], float], ...] = ()
    book: tuple[tuple[Mapping[str, Any], float], ...] = ()


def _even(key: str, *values: str) -> tuple[tuple[Mapping[str, Any], float], ...]:
    return tuple(({key: v}, 1.0) for v in values)


RULES: dict[str, Rule] = {
    "doctor_followup": Rule(check=_even(
        "Message", "You must take your medicine 2 times a day before meals.",
        "Take your medicine before you go to sleep. If you experience nausea, please contact your doctor "
        "immediately.")),
    "doctor_schedule": Rule(
        echo={"DoctorName": "Name", "Time": "StartTimeHour"},
        check=_even("Message", SLOT_FREE, "The doctor has a conflicting appointment at that time. "
                                          "Try another time or another doctor."),
        book=_even("Message", "Your appointment has been successfuly scheduled.")),
    "apartment_schedule": Rule(
        check=_even("Message", SLOT_FREE, "That time is unavailable. Please try another time."),
        book=_even("Message", "Your apartment viewing has been successfuly scheduled.")),
    "party_plan": Rule(
        echo={"VenueName": "Name", "Day": "Day", "Time": "StartTimeHour"},
        # api.py makes "too small" all but unreachable; the logs show it 7 times in 59 checks
        check=(({"Message": "The venue is available."}, 0.8),
               ({"Message": "The venue is booked at that time. Try another meeting time or another venue."},
                0.1),
               ({"Message": "The venue is too small for your party. Try another venue."}, 0.1)),
        book=_even("Message", "Your event has been successfully scheduled.")),
    "party_rsvp": Rule(check=_even("Message", "Thank you for your RSVP. See you there.")),
    "hotel_book": Rule(echo={"HotelName": "Name"}, check=_even("Message", AVAILABLE, UNAVAILABLE),
                       book=_even("Message", CONFIRMED, FAILED)),
    "hotel_service_request": Rule(echo={"RoomNumber": "RoomNumber", "Time": "Time"},
                                  check=(({"RequestStatus": "Request Confirmed"}, 0.8),
                                         ({"RequestStatus": "Request Failed"}, 0.2))),
    "restaurant_book": Rule(echo={"RestaurantName": "Name"}, check=_even("Message", AVAILABLE, UNAVAILABLE),
                            book=_even("ReservationStatus", CONFIRMED, FAILED)),
    "plane_book": Rule(echo={"id": "id"}, check=_even("Message", AVAILABLE, UNAVAILABLE),
                       book=_even("ReservationStatus", CONFIRMED, FAILED)),
    "ride_change": Rule(check=_even("ChangeStatus", "Your trip has been successfully changed.",
                                    "We are unable to change your trip.")),
    "ride_status": Rule(check=_even("RideStatus", "Your driver is dropping off another passenger.",
                                    "Your ride is on its way.", "Your driver is arriving.")),
    "meeting_schedule": Rule(
        echo={"StartTime": "StartTimeHour", "EndTime": "EndTimeHour", "Day": "Day", "GuestName": "Name"},
        check=_even("Message", "Your meeting has been successfuly scheduled.",
                    "That person has a conflicting meeting at that time. Try another meeting time.")),
    "spaceship_life_support": Rule(check=_even("Message", "Successful! Door opened")),
}


def _value(api_inputs: Mapping[str, Any], constraints: list[Constraint], name: str) -> Any:
    """The value a request gave a field: a plain value as it is, a condition as the first choice it accepts
    (STAR looked in the database's column and gave '' where that had no choices; we use the form's)."""
    for constraint in constraints:
        if constraint.field != name:
            continue
        if constraint.op == "equals" and not constraint.negated:
            return constraint.value
        column = api_inputs.get(name)
        for choice in (column.categories or ()) if column else ():
            if constraint.holds({name: choice}):
                return choice
        return ""
    return None


def booking(constraints: list[Constraint]) -> bool:
    """A booking only when RequestType is plainly "Book"; any other condition was a check in STAR."""
    given = [c for c in constraints if c.field == "RequestType"]
    return len(given) == 1 and given[0].op in ("equals", "is_equal_to") and not given[0].negated \
        and given[0].value == "Book"


def _seed(api_name: str, constraints: list[Constraint]) -> random.Random:
    canonical = json.dumps([[c.field, c.op, c.value, c.negated] for c in constraints], sort_keys=True,
                           default=str)
    return random.Random(zlib.crc32(f"{api_name}:{canonical}".encode()))


def possible(kb: KnowledgeBase, api_name: str, raw: ConstraintInput) -> list[tuple[dict[str, Any], float]]:
    """Every answer an outcome API can give this request, with its weight (for scenarios and checks)."""
    api = kb.api(api_name)
    constraints = kb.validate(api_name, raw)
    rule = RULES.get(api_name)
    if rule is None:
        raise InvalidInput(f"API {api_name!r} has no fixed set of answers", "api")
    choices = rule.book if rule.book and booking(constraints) else rule.check
    echoed = {out: _value(api.inputs, constraints, field_) for out, field_ in rule.echo.items()}
    return [({**{k: v for k, v in echoed.items() if v is not None}, **answer}, weight)
            for answer, weight in choices]


def call(kb: KnowledgeBase, api_name: str, raw: ConstraintInput,
         rng: Optional[random.Random] = None) -> QueryResult:
    """Run any STAR API the way its server did, but reproducibly (see the module's docstring)."""
    api = kb.api(api_name)
    if api.searchable:
        return kb.query(api_name, raw)
    constraints = kb.validate(api_name, raw)
    draw = rng or _seed(api_name, constraints)
    if api_name in RULES:
        answers, weights = zip(*possible(kb, api_name, raw))
        item = dict(draw.choices(answers, weights)[0])
        if api_name == "apartment_schedule" and booking(constraints):
            first, second = draw.choice(DOCUMENTS), draw.choice(DOCUMENTS)
            item["Message"] += f" Please bring {first} and {second} with you."
        if api_name == "ride_status":
            item["RideWait"] = f"{draw.randint(1, 10)} minutes away"
        return QueryResult(api_name, (item,))
    special = SPECIAL.get(api_name)
    if special is None:
        raise InvalidInput(f"API {api_name!r} is not supported yet", "api")
    return QueryResult(api_name, special(kb, api_name, constraints, draw))


def _authenticated(constraints: list[Constraint]) -> bool:
    given = {c.field for c in constraints}
    return any(all(f in given for f in fields) for fields in AUTH_SETS)


def _bank(kb: KnowledgeBase, api_name: str, constraints: list[Constraint], draw: random.Random) -> tuple:
    if not _authenticated(constraints):
        return ({"Message": AUTH_MISSING},)
    if api_name == "bank_fraud_report":
        return ({"Confirmation": "Fraud report submitted successfully."},)
    row = draw.choice(kb.databases[kb.api(api_name).db].rows)
    return ({k: v for k, v in row.items() if k != "id"},)


def _access_codes(kb: KnowledgeBase, api_name: str, constraints: list[Constraint],
                  draw: random.Random) -> tuple:
    """Engineers and bartenders need a clearance code; everyone else's code opens the door."""
    api = kb.api(api_name)
    rank, kind = _value(api.inputs, constraints, "UserRank"), _value(api.inputs, constraints, "CodeType")
    if rank in ("Chief Engineer", "Bartender") and kind != "Clearance":
        return ({"Message": "Sorry, you are not authorized to unlock the door. Please obtain a clearance "
                            "code from the Captain."},)
    return ({"Message": "The door is now unlocked."},)


def _search_on_columns(kb: KnowledgeBase, api_name: str, constraints: list[Constraint],
                       leave_out: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Rows meeting the constraints on the database's own columns; the rest describe the request."""
    database = kb.databases[kb.api(api_name).db]
    columns = {c.name for c in database.columns} - set(leave_out)
    on_rows = [c for c in constraints if c.field in columns and c.op in OPS]
    return [dict(row) for row in database.rows if all(c.holds(row) for c in on_rows)]


def _ride_book(kb: KnowledgeBase, api_name: str, constraints: list[Constraint], draw: random.Random) -> tuple:
    if booking(constraints):
        return ({"Message": "Ride booked."},)
    api = kb.api(api_name)
    request = {name: _value(api.inputs, constraints, name)
               for name in ("DepartureLocation", "ArrivalLocation", "CustomerName")}
    return tuple({**row, **request} for row in _search_on_columns(kb, api_name, constraints))


def _trip(kb: KnowledgeBase, api_name: str, constraints: list[Constraint], draw: random.Random) -> tuple:
    """The form's departure time is an hour of the day, the database's a number: STAR searched without it,
    and without the price unless travelling by transit. Steps starting with '#' are the detailed ones."""
    mode = _value(kb.api(api_name).inputs, constraints, "TravelMode")
    leave_out = ("DepartureTime",) if mode == "Transit" else ("DepartureTime", "Price")
    found = []
    for row in _search_on_columns(kb, api_name, constraints, leave_out):
        for key in [k for k in row if k.endswith("Instructions") and not k.startswith("Detailed")]:
            steps = row[key]
            row[key] = [s for s in steps if not s.startswith("#")]
            row["Detailed" + key] = [s[1:] for s in steps if s.startswith("#")]
        found.append(row)
    return tuple(found)


def meets(kb: KnowledgeBase, api_name: str, raw: ConstraintInput, row: Mapping[str, Any]) -> bool:
    """Whether a row could answer a ride check or a trip request: it meets the constraints on the
    database's columns (the test a logged answer must pass, since STAR's rows were random)."""
    constraints = kb.validate(api_name, raw)
    mode = _value(kb.api(api_name).inputs, constraints, "TravelMode")
    leave_out = ("DepartureTime",) if api_name != "trip_directions" or mode == "Transit" \
        else ("DepartureTime", "Price")
    columns = {c.name for c in kb.databases[kb.api(api_name).db].columns} - set(leave_out)
    return all(c.holds(row) for c in constraints if c.field in columns)


SPECIAL = {"bank_balance": _bank, "bank_fraud_report": _bank, "spaceship_access_codes": _access_codes,
           "ride_book": _ride_book, "trip_directions": _trip}

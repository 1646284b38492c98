"""Write trips.csv, the sample Frames database: vacation packages (a round trip and a hotel) drawn from a
seeded generator, so the file is the same on every run. Written for turkflow; the cities are real, the
hotels, prices and dates are made up.

    python turkflow/samples/frames/make_trips.py            # rewrites trips.csv beside this file

``trips(n, seed)`` is also what the search benchmark draws its 100,000 items from.
"""

from __future__ import annotations

import csv
import datetime as dt
import random
import sys
from pathlib import Path

ORIGINS = ("Montreal", "Toronto", "Boston", "Chicago", "Seattle", "Dallas")
# destination, country, what a night and a flight there cost in this made-up world (US dollars)
DESTINATIONS = (
    ("Lisbon", "Portugal", 95, 620), ("Porto", "Portugal", 80, 640), ("Barcelona", "Spain", 120, 600),
    ("Marseille", "France", 110, 650), ("Naples", "Italy", 90, 700), ("Berlin", "Germany", 100, 580),
    ("Dublin", "Ireland", 130, 520), ("Reykjavik", "Iceland", 170, 480), ("Mexico City", "Mexico", 70, 380),
    ("Punta Cana", "Dominican Republic", 140, 420), ("Santos", "Brazil", 75, 760),
    ("Tokyo", "Japan", 150, 980),
    ("Kyoto", "Japan", 140, 1010), ("Cape Town", "South Africa", 85, 1150),
)
NAMES = ("Blue", "Harbour", "Grand", "Little", "Old Town", "Sunset", "Garden", "River", "Royal", "Quiet")
KINDS = ("Inn", "Hotel", "Resort", "Suites", "Lodge", "House")
COLUMNS = ("id", "origin", "destination", "country", "departure", "return", "duration", "price", "seat",
           "hotel", "category", "guest_rating", "max_adults", "max_children", "breakfast", "wifi", "spa")
FIRST_DAY = dt.date(2025, 7, 1)


def trips(n: int, seed: int = 13) -> list[dict]:
    """``n`` packages; the price follows the destination, the nights, the seat and the hotel's stars."""
    rng = random.Random(seed)
    rows = []
    for number in range(1, n + 1):
        origin = rng.choice(ORIGINS)
        destination, country, night, flight = rng.choice(DESTINATIONS)
        departure = FIRST_DAY + dt.timedelta(days=rng.randint(0, 91))
        duration = rng.randint(3, 14)
        seat = "business" if rng.random() < 0.2 else "economy"
        category = rng.choice((2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0))
        max_adults = rng.choice((1, 2, 2, 2, 3, 4, 4, 6, 8))
        price = (flight * (2.4 if seat == "business" else 1.0) + night * duration * (category / 3.0)) \
            * (1 + 0.25 * (max_adults - 2) / 2) * rng.uniform(0.85, 1.2)
        rows.append({
            "id": number, "origin": origin, "destination": destination, "country": country,
            "departure": departure.isoformat(),
            "return": (departure + dt.timedelta(days=duration)).isoformat(), "duration": duration,
            "price": int(round(price)), "seat": seat,
            "hotel": f"{rng.choice(NAMES)} {rng.choice(KINDS)} {destination}",
            "category": category, "guest_rating": round(rng.uniform(4.0, 9.8), 1),
            "max_adults": max_adults, "max_children": rng.choice((0, 0, 1, 2, 2, 3, 4)),
            "breakfast": rng.random() < 0.5, "wifi": rng.random() < 0.8, "spa": rng.random() < 0.25,
        })
    return rows


def write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: str(v).lower() if isinstance(v, bool) else v for k, v in row.items()})


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("trips.csv")
    write(target, trips(240))

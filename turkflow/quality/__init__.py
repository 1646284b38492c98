"""Every quality decision (README.md): the monitor, the content checks, the trust model, gold turns, reviews."""

# Policies a requester can name (``monitor.Policy.parse``), here where naming them costs no import: the
# simulator's help lists them. ``paper`` is the Wizard of Tasks heuristic; with a quarter of raters
# answering at random it blocks most honest workers over a long batch and can stall it. ``probation`` is
# the one the crowd simulator found to catch >=90% of spammers within 6 rated turns while blocking <=3% of
# honest workers (issue 6). ``recommended`` trusts raters by their record (gold turns at onboarding, then
# every rating), judges writers by the sequential test and sends pasters to review (issue 25; bench/RESULTS.md,
# Quality-control efficacy, compares them all on the same ratings; a and b were chosen on seeds 101 and 102).
NAMED_POLICIES = {
    "paper": "k=5,p=0.5",
    "probation": "pooled k=6,p=0.5 for 6, then k=20,p=0.4",
    "recommended": "sprt k=20,a=0.05,b=0.05, not typed 2 of 6",
}

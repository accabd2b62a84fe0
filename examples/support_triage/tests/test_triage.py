"""The triage feature's tests, as the product team wrote them. The module opts in to pytest-slam, so
each test runs once per candidate model and every OpenAI call it makes goes to that candidate.
"""

import pytest
from support_triage import CATEGORIES, URGENCIES, draft_reply, sentiment, triage

pytestmark = pytest.mark.slm

TICKETS = {
    "double_charge": "I was charged twice for my subscription this month. Please refund one payment.",
    "outage": "Nobody in our team can log in since 9am, the app shows error 500. We are completely blocked!",
    "password": "How do I change the email address on my account?",
}


@pytest.mark.slm_equivalence(by="label", choices=["positive", "negative"], at_least=1.0)
def test_happy_customer_is_positive():
    assert sentiment("I love the new dashboard, thank you so much for the quick fix!") == "positive"


@pytest.mark.slm_equivalence(by="label", choices=["positive", "negative"], at_least=1.0)
def test_angry_customer_is_negative():
    message = "This is the third time my invoice is wrong. I am furious and want to cancel."
    assert sentiment(message) == "negative"


@pytest.mark.slm_equivalence(by="json", ignore=["$.summary"], at_least=1.0)
def test_double_charge_is_billing():
    result = triage(TICKETS["double_charge"])
    assert result.category == "billing"


@pytest.mark.slm_equivalence(by="json", ignore=["$.summary"], at_least=1.0)
def test_outage_is_urgent_and_technical():
    result = triage(TICKETS["outage"])
    assert (result.category, result.urgency) == ("technical", "high")


@pytest.mark.slm_equivalence(by="json", ignore=["$.summary"], at_least=0.5)
def test_triage_labels_are_in_range():
    result = triage(TICKETS["password"])
    assert result.category in CATEGORIES
    assert result.urgency in URGENCIES


# The latency budget measures the candidate on the machine that serves it. 30 s is a 4.5x margin over
# SmolLM2-135M's p95 on a quiet 2-core machine (6.7 s), so a busy laptop or CI runner keeps the
# verdict; a product sets its own budget from its SLO, on its serving hardware.
@pytest.mark.slm_budget(e2e_ms=30_000)
def test_reply_greets_the_customer_by_name():
    reply = draft_reply("Maria", "How do I export my data to CSV?")
    assert "Maria" in reply

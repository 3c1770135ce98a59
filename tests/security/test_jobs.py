"""A visitor cannot stop, watch or learn the name of another visitor's fine-tune (docs/deploy.md, threat model).

Visitor A starts a Stage-1 run in a session of their own; visitor B, in another session, asks Stop and asks to start
a run of their own while A's runs. B's Stop reaches nothing and names nothing, B's start is refused without naming
A's run, and A's own Stop still reaches A's run (it was running all along).
"""

from __future__ import annotations

import uuid

from tests.security.public_app import VISITORS


def _form(name: str) -> list:
    return [
        "stage1",  # method
        "minilm-en",  # model (listed on every deployment: a packaged encoder)
        None,  # teacher
        ["en-de"],  # language pairs
        100,  # max pairs
        0.5,  # budget (minutes)
        name,
        False,  # overwrite
        32,  # batch size
        None,  # learning rate
        50,  # eval every
        None,  # max steps
        2,  # max epochs
        100,  # dev rows
        0,  # extend vocab
        "fp32",
        False,  # language probe
        "none",  # STS loss
        0.001,  # STS weight
    ]


def test_only_the_owner_can_stop_a_run_and_others_learn_only_that_one_is_busy(public_app):
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    name = f"owned-{uuid.uuid4().hex[:8]}"
    started = public_app.call("finetune_start", _form(name), session=a, visitor=VISITORS[0])
    assert "Started" in started and name in started, started

    stopped_by_b = public_app.call("finetune_stop", [], session=b, visitor=VISITORS[1])
    assert "no run in progress" in stopped_by_b and name not in stopped_by_b, stopped_by_b
    other_start = public_app.call("finetune_start", _form("b-run"), session=b, visitor=VISITORS[1])
    assert "Started" not in other_start and name not in other_start, other_start
    assert "training run is in progress" in other_start, other_start

    stopped_by_a = public_app.call("finetune_stop", [], session=a, visitor=VISITORS[0])
    assert name in stopped_by_a and ("Stop requested" in stopped_by_a or "Cancelled" in stopped_by_a), stopped_by_a
    assert public_app.alive()


def test_messages_name_no_server_folder(public_app):
    """A refusal that names a run says ``runs/NAME``, never where the runs live on the server."""
    (public_app.runs / "taken").mkdir(exist_ok=True)
    answer = public_app.call("finetune_start", _form("taken"), session=uuid.uuid4().hex)
    assert "already exists" in answer and "runs/taken" in answer, answer
    assert str(public_app.runs) not in answer and str(public_app.runs.parent) not in answer

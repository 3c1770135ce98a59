"""Input checks whose refusals name the field, the value and what is allowed.

Gradio's own ``preprocess`` check gives an API caller a bare "Error"; :func:`check_inputs` puts a check in front of
it that raises ``gr.Error`` naming field, value and what is allowed. It wraps the instance, not a subclass: Gradio
writes a ``.pyi`` stub for every component subclass and rebuilds components from their ``__init__`` arguments.
"""

from __future__ import annotations

from collections.abc import Callable

from mlse.serving.field_checks import choice_problem, number_problem


def _number_check(gr, component) -> Callable:
    original = component.preprocess
    whole = (
        component.precision == 0
        if isinstance(component, gr.Number)
        else (float(component.step or 0).is_integer() and float(component.minimum or 0).is_integer())
    )
    optional = isinstance(component, gr.Number)  # an empty Number means "not given"; a slider always has a value

    def preprocess(payload):
        if optional and (payload is None or (isinstance(payload, str) and not payload.strip())):
            return None
        problem = number_problem(component.label or "number", payload, component.minimum, component.maximum, whole)
        if problem:
            raise gr.Error(problem)
        return original(float(payload))

    return preprocess


def _choice_check(gr, component, allowed: Callable[[], list] | None) -> Callable:
    original = component.preprocess
    multi = isinstance(component, gr.CheckboxGroup) or getattr(component, "multiselect", False)

    def preprocess(payload):
        if payload is None:
            return [] if multi else None
        if multi and not isinstance(payload, list):
            payload = [payload]
        if not getattr(component, "allow_custom_value", False):
            accepted = list(dict.fromkeys([*(v for _, v in component.choices), *(allowed() if allowed else [])]))
            problem = choice_problem(component.label or "choice", payload, accepted)
            if problem:
                raise gr.Error(problem)
        # with ``allowed``, a live name the page's choices do not have yet: Gradio's own check would refuse it
        return payload if allowed else original(payload)

    return preprocess


def check_inputs(*components, allowed: Callable[[], list] | None = None) -> None:
    """Give each Number, Slider, Dropdown, CheckboxGroup or Radio a refusal that names field, value and choices.

    ``allowed``: for choice fields, values accepted besides the page's choices, asked at each call (the live models)."""
    import gradio as gr  # lazy: importing the ui modules (handlers tested on their own) must not load gradio

    for component in components:
        if isinstance(component, (gr.Number, gr.Slider)):
            component.preprocess = _number_check(gr, component)
        elif isinstance(component, (gr.Dropdown, gr.CheckboxGroup, gr.Radio)):
            component.preprocess = _choice_check(gr, component, allowed)

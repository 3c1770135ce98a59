"""Input checks whose refusals name the field, the value and what is allowed.

Gradio checks an input before the handler runs (the component's ``preprocess``): a malformed number reaches an API
caller as a bare "Error" (the real message stays in the server log) and an unknown choice as "Value: x is not in the
list of choices: [...]" without saying which field. :func:`check_inputs` puts a check in front of each component's
``preprocess`` that refuses with one line such as ``Sentences per language: 'ten' is not a number; expected a whole
number from 2 to 1012``, raised as ``gr.Error`` so that the caller sees it.

Why on the instance and not as subclasses: Gradio writes a ``.pyi`` stub beside the source of every component
subclass when it is defined, and rebuilds components from their ``__init__`` arguments; wrapping the instance's
``preprocess`` changes neither. (A component Gradio rebuilds for one browser session after an update falls back to its
own check; browsers only send values the page offers.)
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

    ``allowed``: for choice fields, values accepted besides the page's choices, asked at each call (the live model
    list, so a run trained while the app is up is accepted through the API at once)."""
    import gradio as gr  # lazy: importing the ui modules (handlers tested on their own) must not load gradio

    for component in components:
        if isinstance(component, (gr.Number, gr.Slider)):
            component.preprocess = _number_check(gr, component)
        elif isinstance(component, (gr.Dropdown, gr.CheckboxGroup, gr.Radio)):
            component.preprocess = _choice_check(gr, component, allowed)

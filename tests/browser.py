"""Debian's headless Chromium, driven by Selenium through Debian's chromedriver, on the served mlse app.

Shared by tests/ui/test_app_browser.py and docs/make_screenshots.py. Both binaries come from apt (``chromium``,
``chromium-driver``; .ci/run installs them), so their versions always match and Selenium Manager, which would try to
download a driver, is never asked: the driver's path is given explicitly.

Elements are found by what a user reads (tab names, button labels, field labels), not by Gradio's generated ids, so a
test failing here means the page a person sees changed.
"""

from __future__ import annotations

import io
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# Debian's paths; the variables let another Chromium/chromedriver pair (of one version) stand in on other systems.
CHROMIUM = os.environ.get("MLSE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MLSE_CHROMEDRIVER", "/usr/bin/chromedriver")
WINDOW = (1400, 1000)
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",  # CI runs as root in a container, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers often have a 64 MB /dev/shm, too small for a page with plots
    "--force-device-scale-factor=1",  # same pixel size on every machine, so screenshots stay small and comparable
    "--no-first-run",
    "--disable-extensions",
]
PAGE_TIMEOUT = 60  # seconds; the first load also loads the embedded model on a busy 2-core machine


@dataclass(frozen=True)
class Tab:
    name: str  # the tab's visible name
    marker: str  # the label of a button that only this tab has
    slug: str  # screenshot file: tab-<n>-<slug>.png


# The six tabs in page order (mlse/ui/app.py's TABS), each with its main button.
TABS = (
    Tab("Score a pair", "Score", "score"),
    Tab("Language vs meaning map", "Project", "map"),
    Tab("Tatoeba errors", "Show errors", "tatoeba"),
    Tab("Predicted vs gold", "Compare with gold", "gold"),
    Tab("Fine-tune", "Start", "finetune"),
    Tab("Results", "Refresh", "results"),
)


def screenshot_name(index: int, tab: Tab) -> str:
    return f"tab-{index + 1}-{tab.slug}.png"


def missing_browser() -> str | None:
    """Why a headless browser cannot run here, or None when it can."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the Python package selenium (pip install -r requirements.txt)")
    if not missing:
        return None
    return (
        "no headless browser: missing "
        + ", ".join(missing)
        + " (apt-get install chromium chromium-driver; .ci/run does this)"
    )


def start_chromium(window: tuple[int, int] = WINDOW):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={window[0]},{window[1]}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT)
    return driver


def wait_for(driver, condition, timeout: float, what: str):
    """Poll ``condition(driver)`` until it returns something truthy; a TimeoutException names ``what``."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # Gradio re-renders components on every update, so an element found a moment ago may be gone: retry, not fail.
    wait = WebDriverWait(driver, timeout, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException])
    return wait.until(condition, message=f"timed out after {timeout:.0f} s waiting for {what}")


def _literal(text: str) -> str:
    """``text`` as an XPath string literal (XPath 1.0 has no escapes, so a quote needs concat())."""
    if "'" not in text:
        return f"'{text}'"
    return "concat(" + ', "\'", '.join(f"'{part}'" for part in text.split("'")) + ")"


def visible(driver, xpath: str) -> list:
    return [e for e in driver.find_elements("xpath", xpath) if e.is_displayed()]


def choose(driver, option: str) -> None:
    """Click the visible radio option (or accordion) labelled ``option``."""
    xpath = f"//label[.//span[normalize-space()='{option}']][.//input[@type='radio']]"
    element = wait_for(driver, lambda d: visible(d, xpath), 10, f"the choice {option!r}")[0]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
    element.click()


def page_text(driver) -> str:
    return driver.find_element("tag name", "body").text


def open_app(driver, url: str) -> None:
    """Load the page and wait until Gradio has rendered the first tab's content."""
    driver.get(url)
    wait_for(
        driver,
        lambda d: visible(d, f"//button[@role='tab'][normalize-space()={_literal(TABS[0].name)}]"),
        PAGE_TIMEOUT,
        f"the tab {TABS[0].name!r}",
    )
    button(driver, TABS[0].marker)


@contextmanager
def app_page(url: str, window: tuple[int, int] = WINDOW):
    """Chromium (``window`` wide and high) on the app served at ``url``, its first tab rendered; quit on leaving."""
    driver = start_chromium(window)
    try:
        open_app(driver, url)
        yield driver
    finally:
        driver.quit()


def open_tab(driver, name: str) -> None:
    """Click the tab called ``name`` and wait until it is the selected one."""
    xpath = f"//button[@role='tab'][normalize-space()={_literal(name)}]"
    wait_for(driver, lambda d: visible(d, xpath), 10, f"the tab {name!r}")[0].click()
    wait_for(
        driver,
        lambda d: d.find_element("xpath", xpath).get_attribute("aria-selected") == "true",
        10,
        f"the tab {name!r} to be selected",
    )


def button(driver, label: str, timeout: float = 10):
    """The visible button whose text is exactly ``label``."""
    xpath = f"//button[normalize-space()={_literal(label)}]"
    return wait_for(driver, lambda d: visible(d, xpath), timeout, f"a visible button {label!r}")[0]


def shown_buttons(driver, labels: list[str]) -> list[str]:
    """Those of ``labels`` that label a visible button right now (no waiting)."""
    return [label for label in labels if visible(driver, f"//button[normalize-space()={_literal(label)}]")]


def click(driver, label: str) -> None:
    element = button(driver, label)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
    element.click()


def fill_textbox(driver, label: str, text: str) -> None:
    """Type into the text field labelled ``label`` (Gradio puts the label's span and the textarea in one <label>)."""
    xpath = f"//label[.//span[normalize-space()={_literal(label)}]]//textarea"
    field = wait_for(driver, lambda d: visible(d, xpath), 10, f"a text field labelled {label!r}")[0]
    field.clear()
    field.send_keys(text)


def pick_dropdown(driver, label: str, option: str) -> None:
    """Choose ``option`` in the dropdown labelled ``label``: type it to filter the list, then click the match."""
    from selenium.webdriver.common.keys import Keys

    xpath = f"//input[@role='combobox'][@aria-label={_literal(label)}]"
    field = wait_for(driver, lambda d: visible(d, xpath), 10, f"a dropdown labelled {label!r}")[0]
    field.click()
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(option)
    listbox = field.get_attribute("aria-controls")
    choice = f"//*[@id={_literal(listbox)}]/li[@role='option'][@aria-label={_literal(option)}]"  # text has a ✓ too
    wait_for(driver, lambda d: visible(d, choice), 10, f"the option {option!r} of {label!r}")[0].click()
    wait_for(
        driver,
        lambda d: d.find_element("xpath", xpath).get_attribute("value") == option,
        10,
        f"{label!r} to show {option!r}",
    )


def set_slider(driver, label: str, value: int) -> None:
    """Type ``value`` into the number box of the slider labelled ``label`` (Enter commits it, as a user would)."""
    from selenium.webdriver.common.keys import Keys

    xpath = f"//input[@type='number'][@aria-label={_literal('number input for ' + label)}]"
    field = wait_for(driver, lambda d: visible(d, xpath), 10, f"the slider {label!r}")[0]
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(str(value), Keys.ENTER)


def table_row(driver, first_cell: str, timeout: float) -> list[str]:
    """The texts of the first visible table row whose first cell reads ``first_cell`` (waits for it to appear).

    Gradio 6 draws a Dataframe's rows as a virtual grid of ARIA ``row``/``gridcell`` elements, not <tr>/<td>.
    """
    xpath = f"//*[@role='row'][*[@role='gridcell'][1][normalize-space()={_literal(first_cell)}]]"
    row = wait_for(driver, lambda d: visible(d, xpath), timeout, f"a table row starting with {first_cell!r}")[0]
    return [cell.text.strip() for cell in row.find_elements("xpath", "./*[@role='gridcell']")]


def table_rows(driver) -> int:
    """How many data rows the visible tables show."""
    return len(visible(driver, "//*[@role='row'][*[@role='gridcell']]"))


def visible_plot(driver, timeout: float) -> None:
    """Wait until a Plotly figure has been drawn in the open tab."""
    wait_for(driver, lambda d: visible(d, "//div[contains(@class, 'js-plotly-plot')]"), timeout, "a drawn plot")


def page_height(driver) -> int:
    return int(driver.execute_script("return document.documentElement.scrollHeight"))


def screenshot(driver, path: Path, max_height: int | None = None) -> Path:
    """Save the window as a PNG; with ``max_height``, first grow the window to show the whole tab up to that height."""
    if max_height:
        width = driver.get_window_size()["width"]
        driver.set_window_size(width, min(max(page_height(driver), WINDOW[1]), max_height))
        driver.execute_script("window.scrollTo(0, 0)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(driver.get_screenshot_as_png())
    if max_height:
        driver.set_window_size(*WINDOW)
    return path


def png_problem(path: Path, min_bytes: int = 10_000, max_share: float = 0.99) -> str | None:
    """Why ``path`` is not a real screenshot, or None when it looks like one.

    Not one: no PNG signature, fewer than ``min_bytes`` bytes, or one colour covering more than ``max_share`` of the
    pixels (a blank or all-black page: the app's pages are mostly white, but their text and controls never are <1 %).
    """
    data = path.read_bytes() if path.is_file() else b""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return f"{path} is not a PNG"
    if len(data) < min_bytes:
        return f"{path} has only {len(data)} bytes"
    try:
        from PIL import Image
    except ImportError:  # Pillow comes with gradio; without it, size and signature are all we can check
        return None
    with Image.open(io.BytesIO(data)) as image:
        pixels = image.width * image.height
        counts = image.convert("RGB").getcolors(maxcolors=pixels)  # [(count, colour)], every colour present
    top = max(count for count, _ in counts) / pixels
    if top > max_share:
        return f"{path} is {top:.1%} one colour: a blank page, not a tab"
    return None


def optimise_png(path: Path, colours: int = 256) -> None:
    """Shrink a screenshot for the repository: a 256-colour palette keeps UI text crisp at a fraction of the bytes."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    small.save(buffer, format="PNG", optimize=True)
    if buffer.tell() < os.path.getsize(path):
        path.write_bytes(buffer.getvalue())


def upload_file(driver, label: str, path: Path, timeout: float = 20) -> None:
    """Give ``path`` to the visible file-upload field labelled ``label``, as a user picking the file would.

    Gradio hides the real ``<input type=file>`` behind its drop zone; Selenium may still send a path to it, which is
    what the browser does after a user picks a file. The field must belong to the open tab (its block is visible).
    """
    block = (
        f"//div[contains(concat(' ', normalize-space(@class), ' '), ' block ')]"
        f"[.//*[normalize-space()={_literal(label)}]][.//input[@type='file']]"
    )
    shown = wait_for(driver, lambda d: visible(d, block), timeout, f"a file field labelled {label!r}")
    # the innermost such block: the field itself, not a group around several fields
    field = min(shown, key=lambda e: len(e.find_elements("xpath", ".//div")))
    field.find_element("xpath", ".//input[@type='file']").send_keys(str(Path(path).resolve()))


def allow_downloads(driver, folder: Path) -> None:
    """Downloads go to ``folder`` without a prompt (headless Chromium refuses them otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder)})


def download(driver, file_name: str, folder: Path, timeout: float = 30) -> Path:
    """Click the visible link that downloads ``file_name`` (Gradio's file output names it in ``download``); wait for
    the finished file in ``folder``."""
    import time

    xpath = f"//a[@download={_literal(file_name)}]"
    before = set(folder.iterdir())
    link = wait_for(driver, lambda d: visible(d, xpath), timeout, f"a download link for {file_name!r}")[0]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", link)
    link.click()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [p for p in set(folder.iterdir()) - before if not p.name.endswith(".crdownload")]
        if new:
            return new[0]
        time.sleep(0.2)
    raise TimeoutError(f"no file downloaded into {folder} within {timeout:.0f} s after clicking {file_name!r}")

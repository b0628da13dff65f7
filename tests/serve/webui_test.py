#!/usr/bin/python3
"""The web UI in headless Chromium, against a running server (`tokenmill serve`, or
tests/serve/mock_openai_server.py while developing the page).

It opens the page and checks that
  1. the model list loads from /v1/models and the dashboard fills in from /metrics, polling
     (its poll counter grows);
  2. a message sent with Send streams back: the assistant's text grows, at three or more
     distinct instants (not all at once), and ends in the "done" state;
  3. the dashboard reports generation: tokens/s above zero within the 10 s window;
  4. a long second message shows up as a running request on the dashboard; Stop ends the
     stream at once (state "stopped", no text after it, Send enabled again) and the
     server's running count returns to zero (the cancelled request was freed). This needs a
     reply that lasts a few seconds (a real model, --long-max-tokens large enough): a tiny
     test model that writes its whole context in a fraction of a second fails here;
and saves a screenshot (also when a check fails). Exit status 0 when every check passes.

    /usr/bin/python3 tests/serve/webui_test.py --base-url http://127.0.0.1:8080 --screenshot /tmp/webui.png

Needs Debian's python3-selenium, chromium and chromium-driver (python3 from /usr/bin).
"""

import argparse
import sys
import time

import server_process  # noqa: E402 (this directory is on sys.path when run as a script)
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys


# Records [time (ms), length] in window.replyGrowth whenever the last assistant reply's
# text changes length.
GROWTH_OBSERVER = """
window.replyGrowth = [];
const messages = document.getElementById("messages");
new MutationObserver(() => {
  const replies = messages.querySelectorAll(".msg.assistant .content");
  if (!replies.length) return;
  const length = replies[replies.length - 1].textContent.length;
  const growth = window.replyGrowth;
  if (length && (!growth.length || growth[growth.length - 1][1] !== length))
    growth.push([performance.now(), length]);
}).observe(messages, { childList: true, subtree: true, characterData: true });
"""


class CheckFailed(Exception):
    pass


def log(message):
    print(f"[webui_test] {message}", flush=True)


def wait_for(what, predicate, timeout, interval=0.05):
    """Polls `predicate` until it returns a true value (returned) or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def number(text):
    """The dashboard's number in `text` ("1,234.5", "12.0%"), or None for a placeholder."""
    try:
        return float(text.replace(",", "").rstrip("%"))
    except ValueError:
        return None


class Page:
    def __init__(self, driver):
        self.driver = driver

    def el(self, element_id):
        return self.driver.find_element(By.ID, element_id)

    def text(self, element_id):
        return self.el(element_id).text

    def polls(self):
        return int(self.el("dashboard").get_attribute("data-polls") or 0)

    def dashboard(self, element_id):
        return number(self.text(element_id))

    def set_field(self, element_id, value):
        field = self.el(element_id)
        field.clear()
        field.send_keys(str(value))
        field.send_keys(Keys.TAB)  # fires "change"

    def last_assistant(self):
        bubbles = self.driver.find_elements(By.CSS_SELECTOR, "#messages .msg.assistant")
        return bubbles[-1] if bubbles else None

    def assistant_text(self):
        bubble = self.last_assistant()
        return bubble.find_element(By.CSS_SELECTOR, ".content").text if bubble else ""

    def assistant_state(self):
        bubble = self.last_assistant()
        return bubble.get_attribute("data-state") if bubble else None

    def send(self, message, max_tokens):
        self.set_field("max-tokens", max_tokens)
        self.el("prompt").send_keys(message)
        bubbles = len(self.driver.find_elements(By.CSS_SELECTOR, "#messages .msg.assistant"))
        self.el("send").click()
        wait_for("the assistant's bubble",
                 lambda: len(self.driver.find_elements(By.CSS_SELECTOR, "#messages .msg.assistant")) > bubbles, 5)


def check(page, args):
    # 1. Models and dashboard.
    if args.api_key:
        page.set_field("api-key", args.api_key)
    wait_for("a model in #model", lambda: page.el("model").get_attribute("value"), 15)
    log(f"model: {page.el('model').get_attribute('value')}")
    wait_for("a first /metrics poll", lambda: page.polls() >= 1, 10)
    for element_id in ("running", "waiting", "tokens-per-second", "kv-usage"):
        wait_for(f"a number in #{element_id}", lambda: page.dashboard(element_id) is not None, 5)
    polls = page.polls()
    wait_for("two more /metrics polls", lambda: page.polls() >= polls + 2, 5)
    log(f"dashboard polling: {page.polls()} polls, running {page.text('running')}, "
        f"tokens/s {page.text('tokens-per-second')}, KV {page.text('kv-usage')}")

    # 2. A streamed reply. The page records each change of the reply's length with its time
    # (a MutationObserver), so that a fast server's stream is seen as well as a slow one's:
    # chunks that arrive in one network read are shown at one instant, a stream at several.
    page.driver.execute_script(GROWTH_OBSERVER)
    page.send("Hello! Please introduce yourself in a few sentences.", args.short_max_tokens)
    wait_for("the first reply to finish", lambda: page.assistant_state() != "streaming", args.timeout, 0.1)
    state, text = page.assistant_state(), page.assistant_text()
    growth = page.driver.execute_script("return window.replyGrowth;")
    instants = sorted({round(t, 3) for t, _ in growth})
    lengths = [n for _, n in growth]
    log(f"first reply: state {state}, {len(text)} chars, {page.last_assistant().get_attribute('data-updates')} "
        f"chunks shown in {len(growth)} updates at {len(instants)} instants over "
        f"{(instants[-1] - instants[0]) if instants else 0:.0f} ms")
    if state != "done":
        raise CheckFailed(f"the first reply ended in state {state!r}: {text!r}")
    if not text.strip():
        raise CheckFailed("the first reply is empty")
    if any(b <= a for a, b in zip(lengths, lengths[1:])):
        raise CheckFailed(f"the reply's text did not only grow: lengths {lengths}")
    if len(instants) < 3:
        raise CheckFailed(f"the reply was not streamed: its text grew at {len(instants)} instants only")

    # 3. The dashboard saw the generation.
    wait_for("tokens/s above zero on the dashboard", lambda: (page.dashboard("tokens-per-second") or 0) > 0, 8)
    log(f"dashboard after the reply: tokens/s {page.text('tokens-per-second')}")

    # 4. Stop a long reply.
    page.send("Write a very long story about a windmill, with many chapters.", args.long_max_tokens)
    wait_for("the long reply to stream", lambda: len(page.assistant_text()) > 0, args.timeout)
    wait_for("running >= 1 on the dashboard while streaming", lambda: (page.dashboard("running") or 0) >= 1, 5)
    if page.assistant_state() != "streaming":
        raise CheckFailed("the long reply finished before Stop could be tested; raise --long-max-tokens")
    log(f"dashboard while streaming: running {page.text('running')}")
    page.el("stop").click()
    wait_for("the stopped state", lambda: page.assistant_state() == "stopped", 2)
    stopped = page.assistant_text()
    time.sleep(2.0)
    if page.assistant_text() != stopped:
        raise CheckFailed("text kept arriving after Stop")
    if not page.el("send").is_enabled() or page.el("stop").is_enabled():
        raise CheckFailed("after Stop, Send should be enabled and Stop disabled")
    log(f"stopped at {len(stopped)} chars; no text in the 2 s after")
    wait_for("running back to 0 on the dashboard", lambda: page.dashboard("running") == 0, 10)
    log("dashboard after Stop: running 0")


def run(base_url, args):
    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1440,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(args.chromedriver), options=options)
    failure = None
    try:
        driver.get(base_url.rstrip("/") + "/")
        check(Page(driver), args)
    except CheckFailed as e:
        failure = str(e)
    finally:
        driver.save_screenshot(args.screenshot)
        log(f"screenshot: {args.screenshot}")
        errors = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
        for entry in errors:
            log(f"browser console: {entry.get('message')}")
        driver.quit()
    if failure:
        log(f"FAIL: {failure}")
        return 1
    log("PASS")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="a running server, e.g. http://127.0.0.1:8080")
    parser.add_argument("--binary", help="instead of --base-url: start `BINARY serve -m MODEL` for the test")
    parser.add_argument("--model", help="with --binary: the model to serve (one that streams for seconds)")
    parser.add_argument("--screenshot", required=True, help="PNG written at the end (also on failure)")
    parser.add_argument("--api-key", default="", help="typed into the page's API key field")
    parser.add_argument("--short-max-tokens", type=int, default=48, help="max_tokens of the first message")
    parser.add_argument("--long-max-tokens", type=int, default=2000, help="max_tokens of the stopped message")
    parser.add_argument("--timeout", type=float, default=120, help="seconds for a reply to start or finish")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    if bool(args.binary) == bool(args.base_url) or bool(args.binary) != bool(args.model):
        parser.error("give either --base-url, or --binary and --model")
    if args.base_url:
        return run(args.base_url, args)
    with server_process.serve(args.binary, args.model, "--kv-cache-memory", str(256 << 20),
                              api_key=args.api_key or None) as server:
        return run(server.url, args)


if __name__ == "__main__":
    sys.exit(main())

"""The console with the keyboard alone, in a real browser against the real stack: no mouse click anywhere, only
Tab, Shift+Tab, Enter, Space, Escape and the arrow keys. A tenant owner with an authenticator app signs in
(e-mail, password, then the code step), skips past the header with the skip link, walks the navigation through
every tenant screen (each focused control visibly marked), switches the networking tabs with the arrow keys,
adds an SSH key and creates a VPC through their forms, cancels a delete dialog with Escape and confirms one with
Enter (the focus goes back to the button, then stays in the list the row left); an invited member accepts the
invitation page with the keyboard. The code step and the invitation page are checked with axe-core too. Each step
is one test; they share the state (`K`) and run in file order; a failed step skips the later ones."""
from __future__ import annotations

import base64
import re
import urllib.parse
from types import SimpleNamespace

import pytest
from django_otp.oath import totp
from playwright.sync_api import Page, expect

from tests.e2e.stack import Api

from .conftest import check_a11y, shot
from .world import IMAGE, MIG_FLAVOR, PASSWORD, SSH_KEY, one, tenant

pytestmark = pytest.mark.e2e

K = SimpleNamespace()
OWNER = "owner@quill.example"
GUEST = "reader@quill.example"

# the tenant's navigation, in its order, with the heading each screen shows
SCREENS = [("Dashboard", "Dashboard"), ("Instances", "Instances"), ("Launch instance", "Launch an instance"),
           ("Clusters", "Clusters"), ("Health events", "Health events"), ("Leases", "Leases"),
           ("Networking", "Networking"), ("Volumes", "Volumes"), ("SSH keys", "SSH keys"),
           ("API tokens", "API tokens"), ("Members", "Members"), ("Audit log", "Audit log"), ("Billing", "Billing")]

FOCUSED = """() => {
  const e = document.activeElement
  if (!e || e === document.body) return {tag: 'body', name: '', role: null, id: ''}
  const text = (e.getAttribute('aria-label') || (e.labels && e.labels[0] && e.labels[0].innerText)
                || e.innerText || e.getAttribute('title') || '')
  return {tag: e.tagName.toLowerCase(), role: e.getAttribute('role'), id: e.id,
          name: text.split('\\n')[0].replace(/\\s*\\*$/, '').trim()}
}"""


def _code(secret: bytes, ahead: int = 0) -> str:
    return str(totp(secret, step=30, t0=0, digits=6, drift=ahead)).zfill(6)


def focused(page: Page) -> dict:
    """The element that has the keyboard's focus: tag, role, id and accessible name (label, aria-label or text)."""
    return page.evaluate(FOCUSED)


def tab_to(page: Page, name: str, *, back: bool = False, limit: int = 60) -> dict:
    """Press Tab (Shift+Tab with `back`) until the focused element's name matches the regular expression `name`."""
    seen = []
    for _ in range(limit):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        now = focused(page)
        if re.fullmatch(name, now["name"]):
            return now
        seen.append(now["name"] or now["tag"])
    raise AssertionError(f"Tab never reached {name!r}; it went through {seen}")


def ring_shown(page: Page) -> bool:
    """Whether the focused element looks different from the same element without the focus (its outline, ring or
    border; the text caret is left out of screenshots): what a sighted keyboard user relies on."""
    box = page.evaluate("() => { const r = document.activeElement.getBoundingClientRect();"
                        " return {x: r.x, y: r.y, width: r.width, height: r.height} }")
    clip = {"x": max(box["x"] - 6, 0), "y": max(box["y"] - 6, 0), "width": box["width"] + 12,
            "height": box["height"] + 12}
    with_focus = page.screenshot(clip=clip, animations="disabled")
    page.evaluate("() => { window.__keyboardFocus = document.activeElement; window.__keyboardFocus.blur() }")
    without = page.screenshot(clip=clip, animations="disabled")
    page.evaluate("() => window.__keyboardFocus.focus()")
    return with_focus != without


@pytest.fixture(scope="module")
def world(console_stack):
    K.stack, K.base = console_stack, console_stack.base
    K.ops = Api(console_stack.base, console_stack.ops_token)
    one(K.ops, "flavors", MIG_FLAVOR, name=MIG_FLAVOR["name"])   # the wizard opens on its catalog
    one(K.ops, "images", IMAGE, name=IMAGE["name"])
    K.a = tenant(console_stack, K.ops, "quill", OWNER)
    # the owner enrols an authenticator app through the API, as the person would; from then on the sign-in asks
    # for its code
    url = K.a.api.post("me/totp", expect=201).json()["config_url"]
    secret = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["secret"][0]
    K.secret = base64.b32decode(secret + "=" * (-len(secret) % 8))
    K.a.api.post("me/totp/confirm", {"otp_token": _code(K.secret)}, expect=(200, 201))
    return K


@pytest.fixture
def k(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return K


@pytest.fixture(scope="module")
def tab(browser, world):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def test_1_sign_in_with_the_code_step(k, tab):
    tab.goto(f"{k.base}/ssh-keys")
    expect(tab).to_have_url(re.compile(r"/sign-in\?next=%2Fssh-keys$"))
    expect(tab.get_by_role("heading", name="Sign in to gpucloud")).to_be_visible()
    tab_to(tab, "E-mail")
    assert ring_shown(tab), "the focused e-mail field looks like the others"
    tab.keyboard.type(OWNER)
    tab.keyboard.press("Tab")
    assert focused(tab)["name"] == "Password"
    tab.keyboard.type(PASSWORD)
    tab.keyboard.press("Enter")
    code = tab.get_by_label(re.compile(r"^Authentication code"))
    expect(code).to_be_focused()                 # the step's one field takes the focus itself
    check_a11y(tab, "sign in: authentication code")
    shot(tab, "sign-in-code")
    tab.keyboard.type(_code(k.secret, ahead=1))  # the next window's (the enrolment used this one's)
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("heading", name="SSH keys", exact=True)).to_be_visible()
    expect(tab).to_have_url(re.compile(r"/ssh-keys$"))


def test_2_the_skip_link_goes_past_header_and_navigation(k, tab):
    # where the header's parts and the screen are: the focused skip link lies over them, moving nothing
    where = ("() => [...document.querySelectorAll('header *, #main')]"
             ".map(e => { const r = e.getBoundingClientRect(); return [r.x, r.y] })")
    before = tab.evaluate(where)
    tab.keyboard.press("Tab")
    skip = tab.get_by_role("link", name="Skip to main content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    assert tab.evaluate("() => getComputedStyle(document.activeElement).position") == "fixed"
    assert tab.evaluate(where) == before, "focusing the skip link moved the header or the screen"
    assert ring_shown(tab), "the focused skip link is not marked"
    tab.keyboard.press("Enter")
    expect(tab.locator("#main")).to_be_focused()
    tab_to(tab, "Name")                            # the next stop is the screen's own first field
    expect(tab.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboard")).not_to_be_focused()
    expect(skip).not_to_be_in_viewport()           # out of sight again once left


def test_3_every_screen_through_the_navigation(k, tab):
    tab_to(tab, "Dashboard", back=True)            # from the screen back up into the navigation
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("heading", name="Dashboard", exact=True)).to_be_visible()
    nav = tab.get_by_role("navigation", name="Main")
    for label, heading in SCREENS:
        if label != "Dashboard":
            tab.keyboard.press("Tab")
            assert focused(tab)["name"] == label, (label, focused(tab))
            tab.keyboard.press("Enter")
        expect(tab.get_by_role("heading", name=heading, exact=True, level=2)).to_be_visible()
        link = nav.get_by_role("link", name=label, exact=True)
        expect(link).to_be_focused()               # the focus stays where the person is in the navigation
        expect(link).to_have_attribute("aria-current", "page")
        assert ring_shown(tab), f"the focused {label!r} link is not marked"


def test_4_networking_tabs_with_the_arrow_keys_and_a_vpc_created(k, tab):
    tab_to(tab, "Networking", back=True)
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("heading", name="Networking", exact=True)).to_be_visible()
    vpcs = tab.get_by_role("tab", name="VPCs")
    tab_to(tab, "VPCs")
    expect(vpcs).to_have_attribute("aria-selected", "true")
    tab.keyboard.press("ArrowRight")
    ib = tab.get_by_role("tab", name="InfiniBand partitions")
    expect(ib).to_be_focused()
    expect(ib).to_have_attribute("aria-selected", "true")
    tab.keyboard.press("ArrowLeft")
    expect(vpcs).to_be_focused()
    expect(vpcs).to_have_attribute("aria-selected", "true")
    tab_to(tab, "Name")
    tab.keyboard.type("keyboard-net")
    tab_to(tab, "IPv4 CIDR")
    tab.keyboard.type("10.42.0.0/16")
    tab_to(tab, "Create VPC")
    assert ring_shown(tab), "the focused submit button is not marked"
    tab.keyboard.press("Space")
    expect(tab.get_by_role("table", name="VPCs").get_by_role("row", name=re.compile("keyboard-net"))).to_be_visible()


def test_5_add_an_ssh_key_through_its_form(k, tab):
    tab_to(tab, "SSH keys", back=True)
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("heading", name="SSH keys", exact=True)).to_be_visible()
    tab_to(tab, "Name")
    tab.keyboard.type("laptop")
    tab.keyboard.press("Tab")
    assert focused(tab)["name"] == "Public key"
    tab.keyboard.type(SSH_KEY)
    tab_to(tab, "Add key")
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("table", name="SSH keys").get_by_role("row", name=re.compile("laptop"))).to_be_visible()
    assert [key["name"] for key in k.a.api.all("ssh-keys", project=k.a.project["id"])] == ["laptop"]
    # the focus is back on the form's first field for the next key, not lost on the page's body
    expect(tab.get_by_role("textbox", name=re.compile(r"^Name"))).to_be_focused()


def test_6_a_delete_dialog_escaped_then_confirmed(k, tab):
    delete = tab.get_by_role("button", name="Delete key laptop")
    tab_to(tab, "Delete key laptop")
    assert ring_shown(tab), "the focused row action is not marked"
    tab.keyboard.press("Space")
    dialog = tab.get_by_role("dialog", name="Delete the key “laptop”?")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Delete", exact=True)).to_be_focused()   # the dialog's own action
    for _ in range(4):                             # Tab stays inside the dialog
        tab.keyboard.press("Tab")
        assert tab.evaluate("() => !!document.activeElement.closest('[role=dialog]')"), focused(tab)
    tab.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(delete).to_be_focused()                 # back where the person was
    assert len(k.a.api.all("ssh-keys", project=k.a.project["id"])) == 1   # nothing deleted

    tab.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    confirm = dialog.get_by_role("button", name="Delete", exact=True)
    expect(confirm).to_be_focused()
    tab.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    expect(tab.get_by_text("No SSH keys yet")).to_be_visible()
    assert k.a.api.all("ssh-keys", project=k.a.project["id"]) == []
    # the row, its button and the table are gone (the empty state took its place): the focus stays in the screen
    # (not back at the top of the page), so the next Tab continues there
    inside = "() => document.activeElement !== document.body && !!document.activeElement.closest('#main')"
    assert tab.evaluate(inside), focused(tab)
    tab.keyboard.press("Tab")
    assert tab.evaluate(inside), focused(tab)


def test_7_the_invitation_page_with_the_keyboard(k, browser):
    k.a.api.post("invitations", {"organization": k.a.org["id"], "email": GUEST, "role": "viewer"}, expect=201)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto(f"{k.base}/invitations/accept?token={k.stack.invitation_token(GUEST)}")
        expect(page.get_by_text("You are invited to")).to_contain_text("Quill")
        check_a11y(page, "invitation accept")
        tab_to(page, "Full name")
        assert ring_shown(page), "the focused name field is not marked"
        page.keyboard.type("Reade R")
        page.keyboard.press("Tab")
        assert focused(page)["name"] == "Password"
        page.keyboard.type(PASSWORD)
        tab_to(page, "Accept the invitation")
        assert ring_shown(page), "the focused accept button is not marked"
        page.keyboard.press("Enter")
        expect(page.get_by_text("You joined")).to_contain_text("as viewer")
        check_a11y(page, "invitation accepted")
    finally:
        context.close()

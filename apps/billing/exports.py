"""Invoice and credit-note exports: CSV (rows plus totals) and PDF (fpdf2). Both print the same rounded amounts the
documents store, so the lines add up to the total.

The PDFs carry the seller (settings: BILLING_SELLER_NAME, BILLING_SELLER_ADDRESS, BILLING_SELLER_TAX_ID,
BILLING_SELLER_EMAIL; docs/billing.md) and the buyer (`buyer_name`: the organization's legal name, else its name;
plus the address and tax id of its billing account when it has one), the issue date (an invoice's finalization, a credit note's issue) and an invoice's
due date (issue + BILLING_PAYMENT_TERMS_DAYS), and what was credited against it: SLA credits (its `credits` line)
and the credit notes issued against it, down to the balance due.

The PDFs are set in a Unicode TrueType font (settings BILLING_PDF_FONT and BILLING_PDF_FONT_BOLD; DejaVu Sans from
Debian's fonts-dejavu-core by default), embedded as a subset, so names in any script the font covers print as
written (DejaVu Sans: Latin with its extensions, Greek, Cyrillic; not CJK). A missing or unreadable font file is
the system check `billing.E001` (`manage.py check`, `migrate`) and an `ImproperlyConfigured` error when a
document is rendered, never a document with '?' in place of letters.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
from pathlib import Path
from zoneinfo import ZoneInfo

from django.core.exceptions import ImproperlyConfigured
from fpdf import FPDF

from . import conf
from .models import BillingAccount, CreditNote, Invoice

CSV_COLUMNS = ["invoice_number", "period", "kind", "project", "resource_type", "resource_id", "sku", "pricing_model",
               "sla_tier", "description", "quantity", "unit", "unit_price", "amount", "tax_amount", "currency"]
CREDIT_NOTE_CSV_COLUMNS = ["credit_note_number", "invoice_number", "period", "issued_at", "kind", "description",
                           "amount", "tax_amount", "currency"]


def tax_label(invoice: Invoice) -> str:
    """The tax total's name with the rate the invoice applied (`Invoice.tax_rate`, decided at its run from the
    billing account and the tax-rate table, docs/billing.md "Tax"): ``Tax (19 %)``, ``Tax (9.975 %)``,
    ``Tax (0 %, reverse charge)``. Its credit notes are taxed at the same rate."""
    percent = format((invoice.tax_rate * 100).normalize(), "f")
    return f"Tax ({percent} %, reverse charge)" if invoice.reverse_charge else f"Tax ({percent} %)"


def line_description(line) -> str:
    """A line in the words both exports print: its `description`, written when it was rated
    (`apps.billing.wording`: ``Instance 0190a3b4 (h100-mig-3g40), on demand``, ``SLA credit for 2026-02: ...``,
    an adjustment's own text); a line stored without one reads as its resource type, id and SKU."""
    return line.description or " ".join(v for v in (line.resource_type, line.resource_id, line.sku) if v)


def _lines(invoice: Invoice):
    return invoice.lines.order_by("kind", "resource_type", "resource_id", "sku", "unit_price")


def invoice_csv(invoice: Invoice) -> str:
    """CSV text: a header, one row per line, then subtotal/credits/tax/total rows (kind = the total's name; the
    tax row's description names the rate, `tax_label`)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    number = invoice.display_number or f"DRAFT-{invoice.pk}"
    for line in _lines(invoice):
        writer.writerow([number, invoice.period, line.kind, line.project_id or "", line.resource_type,
                         line.resource_id, line.sku, line.pricing_model, line.sla_tier, line_description(line),
                         line.quantity, line.unit, line.unit_price, line.amount, line.tax_amount, invoice.currency])
    for name in ("subtotal", "credits", "tax", "total"):
        description = tax_label(invoice) if name == "tax" else ""
        writer.writerow([number, invoice.period, name] + [""] * 6 + [description] + [""] * 3
                        + [getattr(invoice, name), "", invoice.currency])
    return out.getvalue()


FONT = "document"  # the family name the documents' font is registered under
#: the first bytes of a TrueType or OpenType font file (or collection)
_FONT_SIGNATURES = (b"\x00\x01\x00\x00", b"true", b"OTTO", b"ttcf")


def font_files() -> dict[str, str]:
    """The documents' font files by fpdf2 style: ``""`` regular (BILLING_PDF_FONT), ``"B"`` bold
    (BILLING_PDF_FONT_BOLD)."""
    return {"": conf.get("BILLING_PDF_FONT"), "B": conf.get("BILLING_PDF_FONT_BOLD")}


def font_problems() -> list[str]:
    """What keeps the configured fonts from being used, one sentence each (empty when both are readable TrueType
    or OpenType files)."""
    problems = []
    for setting, path in zip(("BILLING_PDF_FONT", "BILLING_PDF_FONT_BOLD"), font_files().values(), strict=True):
        try:
            with Path(path).open("rb") as f:
                head = f.read(4)
        except OSError as exc:
            problems.append(f"{setting} = {path!r} cannot be read ({exc.strerror or exc.__class__.__name__})")
            continue
        if head not in _FONT_SIGNATURES:
            problems.append(f"{setting} = {path!r} is not a TrueType or OpenType font")
    return problems


def due_date(invoice: Invoice) -> dt.date | None:
    """The day payment is due: the finalization date + BILLING_PAYMENT_TERMS_DAYS (None for a draft)."""
    if invoice.finalized_at is None:
        return None
    return invoice.finalized_at.date() + dt.timedelta(days=conf.get("BILLING_PAYMENT_TERMS_DAYS"))


def _seller() -> list[str]:
    lines = [conf.get("BILLING_SELLER_NAME"), *conf.get("BILLING_SELLER_ADDRESS").splitlines()]
    if conf.get("BILLING_SELLER_TAX_ID"):
        lines.append(f"Tax ID: {conf.get('BILLING_SELLER_TAX_ID')}")
    if conf.get("BILLING_SELLER_EMAIL"):
        lines.append(conf.get("BILLING_SELLER_EMAIL"))
    return [line for line in lines if line.strip()]


def buyer_name(organization) -> str:
    """The buyer a document is made out to: the organization's `legal_name` (tenant-editable, e.g. "Demo Inc."),
    else its `name` (the billing account has no name of its own)."""
    return organization.legal_name.strip() or organization.name


def _buyer(organization) -> list[str]:
    lines = [buyer_name(organization)]
    account = BillingAccount.objects.filter(organization=organization).first()
    if account is not None:
        lines += account.address.splitlines()
        if account.tax_id:
            lines.append(f"Tax ID: {account.tax_id}")
    return [line for line in lines if line.strip()]


def _document(title: str) -> FPDF:
    problems = font_problems()
    if problems:
        raise ImproperlyConfigured("; ".join(problems) + ": install Debian's fonts-dejavu-core or set it to a "
                                   "TrueType font (docs/billing.md)")
    pdf = FPDF(orientation="L", format="A4")
    for style, path in font_files().items():
        pdf.add_font(FONT, style, path)
    pdf.set_auto_page_break(auto=True, margin=12)
    pdf.add_page()
    pdf.set_font(FONT, "B", 14)
    pdf.cell(0, 10, title, new_x="LMARGIN", new_y="NEXT")
    return pdf


def _parties(pdf: FPDF, organization, dates: list[str]) -> None:
    """Seller (left), buyer (middle) and dates (right), one column each."""
    columns = (["From:", *_seller()], ["Bill to:", *_buyer(organization)], [d for d in dates if d])
    top, width = pdf.get_y(), 90
    bottom = top
    for i, column in enumerate(columns):
        pdf.set_xy(pdf.l_margin + i * width, top)
        for j, text in enumerate(column):
            pdf.set_font(FONT, "B" if j == 0 and i < 2 else "", 9)
            pdf.set_x(pdf.l_margin + i * width)
            pdf.cell(width, 5, text, new_x="LEFT", new_y="NEXT")
        bottom = max(bottom, pdf.get_y())
    pdf.set_xy(pdf.l_margin, bottom + 3)


def _totals(pdf: FPDF, rows: list[tuple[str, object]], currency: str) -> None:
    pdf.ln(4)
    pdf.set_font(FONT, "B", 10)
    for name, value in rows:
        pdf.cell(0, 6, f"{name}: {value} {currency}", new_x="LMARGIN", new_y="NEXT")


def invoice_pdf(invoice: Invoice) -> bytes:
    """An A4 landscape PDF of the invoice: seller, buyer, issue and due dates, the lines, the totals, then the
    credit notes issued against it and the balance due."""
    pdf = _document(f"Invoice {invoice.display_number or '(draft)'} - {buyer_name(invoice.organization)} - "
                    f"{invoice.period}")
    issued = f"{invoice.finalized_at:%Y-%m-%d}" if invoice.finalized_at else "not issued (draft)"
    due = due_date(invoice)
    _parties(pdf, invoice.organization, [f"Issue date: {issued}", f"Due date: {due:%Y-%m-%d}" if due else "",
                                         f"Period: {invoice.period} ({invoice.timezone})"])
    pdf.set_font(FONT, size=9)
    tz = ZoneInfo(invoice.timezone)  # the period in the billing time zone it was cut in
    pdf.cell(0, 6, f"Period {invoice.period_start.astimezone(tz):%Y-%m-%d %H:%M} to "
                   f"{invoice.period_end.astimezone(tz):%Y-%m-%d %H:%M} {invoice.timezone}; "
                   f"status {invoice.status}; currency {invoice.currency}",
             new_x="LMARGIN", new_y="NEXT")
    widths = (161, 28, 14, 26, 26, 22)  # 277 mm: the page width inside the margins
    header = ("Description", "Quantity", "Unit", "Unit price", "Amount", "Tax")
    with pdf.table(col_widths=widths, text_align=("LEFT", "RIGHT", "LEFT", "RIGHT", "RIGHT", "RIGHT")) as table:
        table.row(header)
        for line in _lines(invoice):
            table.row([str(v) for v in (line_description(line), line.quantity, line.unit, line.unit_price,
                                        line.amount, line.tax_amount)])
    rows = [("Subtotal", invoice.subtotal), ("SLA credits", invoice.credits), (tax_label(invoice), invoice.tax),
            ("Total", invoice.total)]
    notes = list(invoice.credit_notes.order_by("number"))
    rows += [(f"Credit note {note.display_number} of {note.issued_at:%Y-%m-%d}", -note.total) for note in notes]
    if invoice.status == "paid":
        rows.append((f"Paid {invoice.paid_at:%Y-%m-%d}", -invoice.amount_paid))
    if notes or invoice.status != "draft":
        rows.append(("Balance due", invoice.balance_due))
    _totals(pdf, rows, invoice.currency)
    if invoice.reverse_charge:
        pdf.set_font(FONT, size=9)
        pdf.multi_cell(0, 5, "Reverse charge: no tax is charged on this invoice; the recipient accounts for the tax "
                             "(buyer's tax ID above).", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def credit_note_csv(note: CreditNote) -> str:
    """CSV text: a header, the credit (its reason, amount before tax and tax), then amount/tax/total rows (the tax
    row's description names the invoice's rate, `tax_label`)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CREDIT_NOTE_CSV_COLUMNS)
    head = [note.display_number, note.invoice.display_number, note.invoice.period, note.issued_at.isoformat()]
    writer.writerow([*head, "credit", note.reason, note.amount, note.tax, note.currency])
    for name, value in (("amount", note.amount), ("tax", note.tax), ("total", note.total)):
        writer.writerow([*head, name, tax_label(note.invoice) if name == "tax" else "", value, "", note.currency])
    return out.getvalue()


def credit_note_pdf(note: CreditNote) -> bytes:
    """An A4 landscape PDF of the credit note: seller, buyer, issue date, the invoice it corrects, the reason and
    the amounts (before tax, tax at the invoice's rate, total)."""
    invoice = note.invoice
    pdf = _document(f"Credit note {note.display_number} - {buyer_name(invoice.organization)}")
    _parties(pdf, invoice.organization, [f"Issue date: {note.issued_at:%Y-%m-%d}",
                                         f"Corrects invoice {invoice.display_number}",
                                         f"of period {invoice.period} ({invoice.timezone})"])
    pdf.set_font(FONT, size=9)
    pdf.multi_cell(0, 6, f"Reason: {note.reason}", new_x="LMARGIN", new_y="NEXT")
    _totals(pdf, [("Amount", note.amount), (tax_label(invoice), note.tax), ("Total credited", note.total)],
            note.currency)
    return bytes(pdf.output())

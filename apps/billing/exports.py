"""Invoice exports: CSV (one row per line plus totals) and PDF (fpdf2). Both print the same rounded amounts the
invoice stores, so the lines add up to the total."""
from __future__ import annotations

import csv
import io

from fpdf import FPDF

from .models import Invoice

CSV_COLUMNS = ["invoice_number", "period", "kind", "project", "resource_type", "resource_id", "sku", "pricing_model",
               "sla_tier", "description", "quantity", "unit", "unit_price", "amount", "tax_amount", "currency"]


def _lines(invoice: Invoice):
    return invoice.lines.order_by("kind", "resource_type", "resource_id", "sku", "unit_price")


def invoice_csv(invoice: Invoice) -> str:
    """CSV text: a header, one row per line, then subtotal/credits/tax/total rows (kind = the total's name)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    number = invoice.display_number or f"DRAFT-{invoice.pk}"
    for line in _lines(invoice):
        writer.writerow([number, invoice.period, line.kind, line.project_id or "", line.resource_type,
                         line.resource_id, line.sku, line.pricing_model, line.sla_tier, line.description,
                         line.quantity, line.unit, line.unit_price, line.amount, line.tax_amount, invoice.currency])
    for name in ("subtotal", "credits", "tax", "total"):
        writer.writerow([number, invoice.period, name] + [""] * 10 + [getattr(invoice, name), "", invoice.currency])
    return out.getvalue()


def _latin1(text: str) -> str:
    """Core PDF fonts and our 7-bit output: characters outside ASCII print as '?'."""
    return str(text).encode("ascii", "replace").decode("ascii")


def invoice_pdf(invoice: Invoice) -> bytes:
    """A one-table A4 landscape PDF of the invoice. Uncompressed with core fonts, so the file is 7-bit ASCII (the
    header's optional binary-marker comment is written as ASCII too; byte offsets are unchanged)."""
    pdf = FPDF(orientation="L", format="A4")
    pdf.set_compression(False)
    pdf.set_auto_page_break(auto=True, margin=12)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 14)
    title = f"Invoice {invoice.display_number or '(draft)'} - {invoice.organization.name} - {invoice.period}"
    pdf.cell(0, 10, _latin1(title), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=9)
    pdf.cell(0, 6, _latin1(f"Period {invoice.period_start:%Y-%m-%d %H:%M} to {invoice.period_end:%Y-%m-%d %H:%M} UTC "
                           f"({invoice.timezone}); status {invoice.status}; currency {invoice.currency}"),
             new_x="LMARGIN", new_y="NEXT")
    widths = (22, 70, 75, 28, 14, 26, 24, 18)
    header = ("Kind", "Resource", "SKU", "Quantity", "Unit", "Unit price", "Amount", "Tax")
    with pdf.table(col_widths=widths, text_align=("LEFT", "LEFT", "LEFT", "RIGHT", "LEFT", "RIGHT", "RIGHT",
                                                  "RIGHT")) as table:
        table.row(header)
        for line in _lines(invoice):
            resource = f"{line.resource_type} {line.resource_id}".strip() or line.description
            table.row([_latin1(v) for v in (line.kind, resource, line.sku, line.quantity, line.unit, line.unit_price,
                                            line.amount, line.tax_amount)])
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 10)
    for name in ("subtotal", "credits", "tax", "total"):
        pdf.cell(0, 6, f"{name.title()}: {getattr(invoice, name)} {invoice.currency}", new_x="LMARGIN", new_y="NEXT")
    data = bytes(pdf.output())
    head, sep, rest = data.partition(b"\n")
    marker, sep2, rest2 = rest.partition(b"\n")
    if marker.startswith(b"%") and any(byte > 127 for byte in marker):
        marker = b"%" + b"A" * (len(marker) - 1)
        data = head + sep + marker + sep2 + rest2
    return data

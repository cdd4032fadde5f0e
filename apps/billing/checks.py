"""System checks of the billing app (`manage.py check`; `migrate` runs them too, so a deploy stops there)."""
from django.core import checks


@checks.register()
def pdf_fonts_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """billing.E001: a font the invoice and credit-note PDFs need (BILLING_PDF_FONT, BILLING_PDF_FONT_BOLD) is
    missing or not a TrueType/OpenType file (`exports.font_problems`)."""
    from .exports import font_problems

    return [checks.Error(problem, hint="Install Debian's fonts-dejavu-core (scripts/system-packages.sh) or set "
                                       "the setting to a TrueType font covering your customers' names.",
                         id="billing.E001") for problem in font_problems()]

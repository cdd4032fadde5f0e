"""Billing: SLA tiers, price books, metering (usage records), rating, invoices, credit notes, SLA credits."""

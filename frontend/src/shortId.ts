/**
 * An object's id shortened for a table cell: its last 8 hex digits ("…a9d6669f"). Ids are UUIDv7 (RFC 9562 §5.7),
 * whose first 48 bits are the creation time in milliseconds, so objects made together share their first 8 digits;
 * the last ones are random. Invoice and credit lines name a resource the same way, so one object reads alike
 * everywhere.
 */
export function shortId(id: string | null | undefined): string {
  return id ? String(id).slice(-8) : ''
}

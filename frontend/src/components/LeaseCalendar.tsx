import { Paper, Stack, Text, Title } from '@mantine/core'
import type { Lease } from '../api/client'

const DAY_MS = 86_400_000
/** Lease states drawn on the calendar: what holds (or will hold) capacity. Cancelled, rejected and ended leases
 * are history (the table lists them). */
export const ON_CALENDAR = new Set(['requested', 'confirmed', 'active', 'ending'])

export interface CalendarBar {
  lease: Lease
  /** Offset and width in percent of the calendar's span; a window running past either edge is cut there. */
  left: number
  width: number
  clippedStart: boolean
  clippedEnd: boolean
}

/** Midnight (local time) of the Monday of the week `at` falls in. */
export function weekStart(at: Date): Date {
  const d = new Date(at.getFullYear(), at.getMonth(), at.getDate())
  d.setDate(d.getDate() - ((d.getDay() + 6) % 7))
  return d
}

/** The bars of `leases` on a calendar of `days` days from `from`: only leases on the calendar (`ON_CALENDAR`)
 * whose window overlaps it, in start order. */
export function calendarBars(leases: Lease[], from: Date, days: number): CalendarBar[] {
  const start = from.getTime()
  const span = days * DAY_MS
  return leases
    .filter((l) => ON_CALENDAR.has(l.status))
    .map((lease) => ({ lease, s: new Date(lease.start).getTime(), e: new Date(lease.end).getTime() }))
    .filter(({ s, e }) => e > start && s < start + span)
    .sort((a, b) => a.s - b.s)
    .map(({ lease, s, e }) => {
      const a = Math.max(s, start)
      const b = Math.min(e, start + span)
      return { lease, left: ((a - start) / span) * 100, width: Math.max(((b - a) / span) * 100, 0.5),
        clippedStart: s < start, clippedEnd: e > start + span }
    })
}

const STATUS_FILL: Record<string, string> = {
  requested: 'var(--mantine-color-blue-8)', confirmed: 'var(--mantine-color-violet-8)',
  active: 'var(--mantine-color-teal-9)', ending: 'var(--mantine-color-grape-8)',
}

/** The project's leases on a four-week calendar from this week's Monday (the browser's time zone): one row per
 * lease, a bar over its window, labelled with its name, size and status. */
export function LeaseCalendar({ leases, size, now = new Date(), days = 28 }: {
  leases: Lease[]
  size: (lease: Lease) => string
  now?: Date
  days?: number
}) {
  const from = weekStart(now)
  const bars = calendarBars(leases, from, days)
  const dayList = Array.from({ length: days }, (_, i) => new Date(from.getFullYear(), from.getMonth(), from.getDate() + i))
  const today = Math.floor((now.getTime() - from.getTime()) / DAY_MS)
  const fmt = (d: Date) => d.toLocaleString(undefined, { weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' })
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="lease-calendar">
      <Stack gap="xs">
        <Title order={3} size="h4" id="lease-calendar">
          Calendar
        </Title>
        <Text size="sm" c="dimmed">
          Four weeks from {dayList[0].toLocaleDateString(undefined, { day: 'numeric', month: 'long' })}; each bar is a
          lease's window.
        </Text>
        <div className="lease-calendar" data-testid="lease-calendar">
          <div className="lease-calendar-row" aria-hidden="true">
            <div className="lease-calendar-name" />
            <div className="lease-calendar-days">
              {dayList.map((d, i) => (
                <div key={i} className={`lease-calendar-day${i === today ? ' today' : ''}${d.getDay() === 1 ? ' monday' : ''}`}>
                  <span className="lease-calendar-month">
                    {i === 0 || d.getDate() === 1 ? d.toLocaleDateString(undefined, { month: 'short' }) : '\u00a0'}
                  </span>
                  {d.getDate()}
                </div>
              ))}
            </div>
          </div>
          {bars.length === 0 && (
            <Text size="sm" c="dimmed" py="xs">
              No lease in these four weeks.
            </Text>
          )}
          <ul className="lease-calendar-list">
            {bars.map((bar) => (
              <li key={bar.lease.id} className="lease-calendar-row">
                <div className="lease-calendar-name">
                  {bar.lease.name}
                  <Text span size="xs" c="dimmed" display="block" className="lease-calendar-size">
                    {size(bar.lease)} · {bar.lease.status}
                  </Text>
                </div>
                <div className="lease-calendar-days">
                  <div
                    className="lease-calendar-bar"
                    data-testid="calendar-lease"
                    style={{ left: `${bar.left}%`, width: `${bar.width}%`, background: STATUS_FILL[bar.lease.status] }}
                    title={`${bar.lease.name}: ${fmt(new Date(bar.lease.start))} – ${fmt(new Date(bar.lease.end))}`}
                  >
                    <span className="visually-hidden">
                      {bar.lease.name}: {size(bar.lease)}, {bar.lease.status}, from {fmt(new Date(bar.lease.start))} to{' '}
                      {fmt(new Date(bar.lease.end))}
                    </span>
                  </div>
                </div>
              </li>
            ))}
          </ul>
        </div>
      </Stack>
    </Paper>
  )
}

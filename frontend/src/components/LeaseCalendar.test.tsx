import { MantineProvider } from '@mantine/core'
import { render, screen } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Lease } from '../api/client'
import { LeaseCalendar, calendarBars, weekStart } from './LeaseCalendar'

const lease = (id: string, start: string, end: string, status = 'confirmed') =>
  ({ id, name: id, status, start, end, kind: 'gpus', count: 8, gpu_model: 'H100' }) as unknown as Lease

describe('lease calendar', () => {
  it('starts on the Monday of this week', () => {
    const monday = weekStart(new Date(2026, 11, 4, 15, 30)) // Friday 4 December 2026
    expect([monday.getFullYear(), monday.getMonth(), monday.getDate(), monday.getDay(), monday.getHours()]).toEqual([2026, 10, 30, 1, 0])
    expect(weekStart(new Date(2026, 11, 7, 0, 0)).getDate()).toBe(7) // a Monday is its own week's start
  })

  it('places each lease in percent of the span, cuts windows at the edges and leaves out history', () => {
    const from = new Date(Date.UTC(2026, 11, 7))
    const bars = calendarBars([
      lease('later', '2026-12-14T00:00:00Z', '2026-12-21T00:00:00Z'),
      lease('first', '2026-12-07T00:00:00Z', '2026-12-09T08:00:00Z'),
      lease('long', '2026-11-30T00:00:00Z', '2027-02-01T00:00:00Z', 'active'),
      lease('gone', '2026-12-08T00:00:00Z', '2026-12-09T00:00:00Z', 'cancelled'),
      lease('outside', '2027-03-01T00:00:00Z', '2027-03-02T00:00:00Z'),
    ], from, 28)
    expect(bars.map((b) => b.lease.name)).toEqual(['long', 'first', 'later'])
    expect(bars[0]).toMatchObject({ left: 0, width: 100, clippedStart: true, clippedEnd: true })
    expect(bars[1].left).toBe(0)
    expect(bars[1].width).toBeCloseTo((56 / (28 * 24)) * 100)
    expect(bars[2]).toMatchObject({ left: 25, width: 25, clippedStart: false, clippedEnd: false })
  })

  it('draws a bar per lease with its name, size and status', () => {
    render(
      <MantineProvider>
        <LeaseCalendar now={new Date(2026, 11, 7, 12)} size={(l) => `${l.count} × ${l.gpu_model} GPUs`}
          leases={[lease('training', new Date(2026, 11, 8, 9).toISOString(), new Date(2026, 11, 10, 9).toISOString())]} />
      </MantineProvider>,
    )
    const bars = screen.getAllByTestId('calendar-lease')
    expect(bars).toHaveLength(1)
    expect(bars[0]).toHaveTextContent('training: 8 × H100 GPUs, confirmed')
  })
})

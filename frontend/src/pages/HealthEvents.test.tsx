import { screen, waitFor } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { PROJECT, json, renderPage, stubApi } from '../test/render'
import { HealthEventsPage, classLabel, signalLabel } from './HealthEvents'

const VM = '0190a3b4-0000-7000-8000-0000000000f1'
const EVENT = {
  event: 'ev1', project: PROJECT.id, resource_type: 'instance', resource_id: VM, kind: 'xid', xid: 79, count: 1,
  observed_at: '2026-12-03T10:00:00Z', classification: 'gpu_lost', provider_at_fault: true,
}
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const LONG = { timeout: 5000 }

describe('health events', () => {
  it('says the class and signal in words', () => {
    expect(classLabel('gpu_lost')).toBe('GPU lost')
    expect(classLabel('some_new_class')).toBe('some new class')
    expect(classLabel('')).toBe('Not classified')
    expect(signalLabel({ kind: 'xid', xid: 79, count: 1 })).toBe('XID 79')
    expect(signalLabel({ kind: 'nvlink_down', xid: null, count: 3 })).toBe('nvlink down (× 3)')
  })

  it('lists the project\'s events with the affected instance by name, linked', async () => {
    const seen = stubApi({
      'GET /api/v1/health-events/': () => json(page([EVENT])),
      [`GET /api/v1/instances/${VM}/`]: () => json({ id: VM, name: 'notebook' }),
    })
    renderPage(<HealthEventsPage />)
    const link = await screen.findByRole('link', { name: 'notebook' }, LONG)
    expect(link).toHaveAttribute('href', `/instances/${VM}`)
    const row = screen.getByTestId('health-event')
    expect(row).toHaveTextContent('GPU lost')
    expect(row).toHaveTextContent('XID 79')
    expect(row).toHaveTextContent('yes')
    const ask = new URL(seen.find((r) => r.url.includes('/health-events/'))!.url)
    expect(ask.searchParams.get('project')).toBe(PROJECT.id)
    expect(ask.searchParams.get('resource_id')).toBeNull()
  })

  it('shows one instance\'s events when opened from its detail, and an empty state', async () => {
    const seen = stubApi({
      'GET /api/v1/health-events/': () => json(page([])),
      [`GET /api/v1/instances/${VM}/`]: () => json({ id: VM, name: 'notebook' }),
    })
    renderPage(<HealthEventsPage />, { path: `/health-events?instance=${VM}` })
    expect(await screen.findByTestId('empty-state', {}, LONG)).toHaveTextContent('No health events')
    await waitFor(() => expect(screen.getByRole('heading', { name: 'Health events of notebook' })).toBeInTheDocument(), LONG)
    const ask = new URL(seen.find((r) => r.url.includes('/health-events/'))!.url)
    expect(ask.searchParams.get('resource_id')).toBe(VM)
  })
})

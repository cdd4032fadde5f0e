import { fireEvent, screen, waitFor } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Flavor } from '../api/client'
import { PROJECT, json, renderPage, stubApi } from '../test/render'
import { LaunchPage } from './Launch'

const base = { description: '', kind: '', vcpus: 8, memory_mib: 65536, disk_gib: 100, gpu_count: 0, mig_profile: '', vgpu_type: '', share_milli: 0, hugepages: false, visibility: 'public', is_active: true, created_at: '' }
const FLAVORS = [{ ...base, id: 'f2', name: 'h100-mig-3g40', gpu_form: 'mig', gpu_model: 'H100', mig_profile: '3g.40gb' }] as Flavor[]
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const CHECK = {
  placeable: true, code: null, detail: null, reason: null, explanation: {}, earliest_start: null, start: null,
  queue: { would_queue: false, position: null }, quota: [],
  price: { currency: 'USD', sla_tier: 'standard', pricing_model: 'on_demand', sku: 'flavor:name=h100-mig-3g40', unit: 'hour', unit_price: '0.99', units: '1', per_hour: '0.99', hours: null, estimate_total: null },
}
const LONG = { timeout: 5000 }

describe('launch wizard', () => {
  it('answers whether a flavor can be placed as soon as it is chosen, before the name and image', async () => {
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/images/': () => json(page([])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([])),
      'POST /api/v1/instances/check/': () => json(CHECK),
    })
    renderPage(<LaunchPage />)
    fireEvent.click(await screen.findByLabelText(/h100-mig-3g40/, {}, LONG))
    const answer = await screen.findByTestId('flavor-check', {}, LONG)
    await waitFor(() => expect(answer).toHaveTextContent('Can be placed now'), LONG)
    expect(answer).toHaveTextContent('$0.99 per hour')
    const ask = seen.find((r) => r.method === 'POST')!
    expect(await ask.json()).toEqual({ project: PROJECT.id, flavor: 'f2', name: '', ssh_keys: [], user_data: '', sla_tier: '', queue: false })
  }, 15_000)
})

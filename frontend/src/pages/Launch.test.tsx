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

/** The input labelled `label` (a Mantine combobox also labels its listbox). */
async function input(label: RegExp): Promise<HTMLElement> {
  return (await screen.findAllByLabelText(label, {}, LONG)).find((el) => el.tagName === 'INPUT')!
}

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

  it('sends the chosen InfiniBand partition with the check, shows why it cannot be placed, and estimates the cost', async () => {
    const IMAGE = { id: 'img1', name: 'ubuntu-24-04', os: 'ubuntu', os_version: '24.04', arch: 'x86_64', is_active: true }
    const PART = { id: 'ib1', project: PROJECT.id, fabric: 'ib-compute', name: 'train', pkey: 256, pkey_hex: '0x0100', ipoib: true, mtu: null, rate_gbps: null, sl: null, index0: false, members: [], created_at: '', updated_at: '' }
    const detail = 'No capacity of this fleet could ever hold the request: ib_partition: no HCA port on fabric ib-compute (1 host)'
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/images/': () => json(page([IMAGE])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([])),
      'GET /api/v1/ib-partitions/': () => json(page([PART])),
      'POST /api/v1/instances/check/': async (request) => {
        const body = await request.json()
        if (!body.ib_partition_id) return json(CHECK)
        return json({ ...CHECK, placeable: false, code: 'unplaceable', reason: 'ib_partition', detail })
      },
    })
    renderPage(<LaunchPage />)
    fireEvent.click(await screen.findByLabelText(/h100-mig-3g40/, {}, LONG))
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    fireEvent.change(await input(/^Name/), { target: { value: 'nb' } })
    fireEvent.click(await input(/^Image/))
    fireEvent.click(await screen.findByRole('option', { name: /ubuntu/, hidden: true }, LONG))
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    fireEvent.click(await input(/^InfiniBand partition/))
    fireEvent.click(await screen.findByRole('option', { name: 'train (ib-compute, 0x0100)', hidden: true }, LONG))
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    const answer = await screen.findByTestId('placement-check', {}, LONG)
    expect(answer).toHaveTextContent('Cannot be launched')
    expect(answer).toHaveTextContent(`Why: ${detail} (ib_partition)`)
    expect(screen.getByRole('button', { name: 'Launch' })).toBeDisabled()
    const ask = seen.filter((r) => r.method === 'POST').at(-1)!
    expect(await ask.json()).toMatchObject({ flavor: 'f2', image: 'img1', name: 'nb', ib_partition_id: 'ib1' })
    expect(screen.getByTestId('estimate')).toHaveTextContent('About $23.76 for 24 hours at $0.99 per hour (estimate)')
    fireEvent.change(await input(/^Running for/), { target: { value: '10' } })
    await waitFor(() => expect(screen.getByTestId('estimate')).toHaveTextContent('About $9.90 for 10 hours'))
  }, 20_000)
})

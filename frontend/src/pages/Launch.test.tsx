import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react'
import { useLocation, useNavigate } from 'react-router'
import { describe, expect, it } from 'vitest'
import type { Flavor } from '../api/client'
import { PROJECT, json, problem, renderPage, stubApi } from '../test/render'
import { LaunchPage, draftKey } from './Launch'

/** The router's location, and the browser's Back, for the history tests. */
function Where() {
  const location = useLocation()
  const navigate = useNavigate()
  return (
    <>
      <span data-testid="where">{location.pathname + location.search}</span>
      <button type="button" data-testid="go-back" onClick={() => navigate(-1)}>back</button>
    </>
  )
}

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

  it('puts the step in the URL, so the browser\'s Back goes to the previous step', async () => {
    stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/images/': () => json(page([])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([])),
      'POST /api/v1/instances/check/': () => json(CHECK),
    })
    renderPage(<><LaunchPage /><Where /></>, { path: '/launch', route: '/launch' })
    fireEvent.click(await screen.findByLabelText(/h100-mig-3g40/, {}, LONG))
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    await waitFor(() => expect(screen.getByTestId('where')).toHaveTextContent('?step=2'))
    expect(await input(/^Name/)).toBeInTheDocument()
    fireEvent.click(screen.getByTestId('go-back'))
    await waitFor(() => expect(screen.getByTestId('where')).toHaveTextContent('/launch'))
    expect(screen.getByTestId('where')).not.toHaveTextContent('step')
    expect(screen.getByLabelText(/h100-mig-3g40/)).toBeChecked()      // the choice is still there
  }, 15_000)

  it('tells a viewer calmly that the check is for those who can launch, with the server’s words', async () => {
    stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/images/': () => json(page([])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([])),
      'POST /api/v1/instances/check/': () => problem(403, 'permission_denied', 'Your role in this project does not allow this action.'),
    })
    renderPage(<LaunchPage />)
    fireEvent.click(await screen.findByLabelText(/h100-mig-3g40/, {}, LONG))
    const note = await screen.findByTestId('check-not-for-role', {}, LONG)
    expect(note).toHaveTextContent('Your role in this project does not allow this action.')
    expect(screen.queryByText('The check was refused')).toBeNull()
  }, 15_000)

  it('sends the chosen InfiniBand partition with the check, shows why it cannot be placed, and estimates the cost', async () => {
    const IMAGE = { id: 'img1', name: 'ubuntu-24-04', os: 'ubuntu', os_version: '24.04', arch: 'x86_64', is_active: true }
    const PART = { id: 'ib1', project: PROJECT.id, fabric: 'ib-compute', name: 'train', pkey: 256, pkey_hex: '0x0100', ipoib: true, mtu: null, rate_gbps: null, sl: null, index0: false, members: [], created_at: '', updated_at: '' }
    const detail = 'No capacity of this fleet could ever hold the request: no HCA port on fabric ib-compute (1 host)'
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
    expect(answer).toHaveTextContent(`Why: ${detail}`)
    expect(answer).not.toHaveTextContent("(ib_partition)")   // the filter name is for scripts
    expect(screen.getByRole('button', { name: 'Launch' })).toBeDisabled()
    const ask = seen.filter((r) => r.method === 'POST').at(-1)!
    expect(await ask.json()).toMatchObject({ flavor: 'f2', image: 'img1', name: 'nb', ib_partition_id: 'ib1' })
    expect(screen.getByTestId('estimate')).toHaveTextContent('About $23.76 for 24 hours at $0.99 per hour (estimate)')
    fireEvent.change(await input(/^Running for/), { target: { value: '10' } })
    await waitFor(() => expect(screen.getByTestId('estimate')).toHaveTextContent('About $9.90 for 10 hours'))
  }, 20_000)
  const IMAGE = { id: 'img1', name: 'ubuntu-24-04', os: 'ubuntu', os_version: '24.04', arch: 'x86_64', is_active: true }
  const instance = (id: string, name: string) => ({ id, name, status: 'pending' })
  const accepted = (id: string, name: string) => json({ instance: instance(id, name), operation: { id: `op-${id}` } }, 202)
  /** The API a wizard test talks to: a flavor, an image, no SSH keys or subnets, a check that places; `extra`
   * adds or replaces routes. Returns the requests seen. */
  const wizardRoutes = (extra: Parameters<typeof stubApi>[0] = {}) => stubApi({
    'GET /api/v1/flavors/': () => json(page(FLAVORS)),
    'GET /api/v1/images/': () => json(page([IMAGE])),
    'GET /api/v1/ssh-keys/': () => json(page([])),
    'GET /api/v1/subnets/': () => json(page([])),
    'POST /api/v1/instances/check/': () => json(CHECK),
    ...extra,
  })

  /** Flavor, name and image chosen; on the "How many, market, network" step. */
  async function toThirdStep(name: string) {
    fireEvent.click(await screen.findByLabelText(/h100-mig-3g40/, {}, LONG))
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    fireEvent.change(await input(/^Name/), { target: { value: name } })
    fireEvent.click(await input(/^Image/))
    fireEvent.click(await screen.findByRole('option', { name: /ubuntu/, hidden: true }, LONG))
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
  }

  it('launches inside an active lease of the project through the request API, without the on-demand check', async () => {
    const LEASE = { id: 'l1', project: PROJECT.id, name: 'finetune', status: 'active', kind: 'mig', gpu_model: 'H100', count: 2, mig_profile: '3g.40gb', start: '2026-01-01T00:00:00Z', end: '2026-01-03T00:00:00Z' }
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/images/': () => json(page([IMAGE])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([])),
      'GET /api/v1/ib-partitions/': () => json(page([])),
      'GET /api/v1/leases/': () => json(page([LEASE])),
      'POST /api/v1/instances/check/': () => json(CHECK),
      'POST /api/v1/instance-requests/': () => accepted('i1', 'nb'),
    })
    renderPage(<LaunchPage />, { path: '/launch', route: '/launch' })
    await toThirdStep('nb')
    fireEvent.click(screen.getByLabelText('Inside a lease'))
    expect(screen.getByRole('button', { name: 'Next' })).toBeDisabled()          // no lease chosen yet
    fireEvent.click(await input(/^Lease/))
    fireEvent.click(await screen.findByRole('option', { name: /^finetune \(2 × H100 MIG 3g\.40gb/, hidden: true }, LONG))
    expect(await input(/^Subnet/)).toBeDisabled()
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    expect(await screen.findByTestId('lease-note', {}, LONG)).toHaveTextContent('the lease’s own GPUs decide')
    expect(screen.getByTestId('estimate')).toHaveTextContent('Billed as part of the lease')
    expect(screen.queryByRole('button', { name: 'Check again' })).toBeNull()
    fireEvent.click(screen.getByRole('button', { name: 'Launch' }))
    expect(await screen.findByTestId('elsewhere', {}, LONG)).toBeInTheDocument()
    const posts = seen.filter((r) => r.method === 'POST')
    expect(posts.filter((r) => r.url.endsWith('/instances/check/') && !r.bodyUsed)).toHaveLength(1)   // the flavor's only
    expect(await posts.at(-1)!.json()).toEqual({ project: PROJECT.id, name: 'nb', flavor: 'f2', image: 'img1', ssh_keys: [], user_data: '', market: 'lease', lease: 'l1', queue_timeout_s: 0 })
  }, 20_000)

  it('launches a cluster of N nodes, checked as one gang', async () => {
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/images/': () => json(page([IMAGE])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([])),
      'GET /api/v1/ib-partitions/': () => json(page([])),
      'GET /api/v1/leases/': () => json(page([])),
      'POST /api/v1/instances/check/': () => json(CHECK),
      'POST /api/v1/clusters/check/': () => json({ ...CHECK, price: { ...CHECK.price, per_hour: '1.98' } }),
      'POST /api/v1/clusters/': () => json({ id: 'c1', name: 'train', size: 2 }, 201),
    })
    renderPage(<LaunchPage />, { path: '/launch', route: '/launch' })
    await toThirdStep('train')
    fireEvent.click(screen.getByLabelText('A cluster of N nodes'))
    expect(screen.getByLabelText('Spot')).toBeDisabled()
    fireEvent.change(await input(/^Nodes/), { target: { value: '2' } })
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    expect(await screen.findByTestId('placement-check', {}, LONG)).toHaveTextContent('$1.98 per hour')
    expect(screen.getByTestId('how-many')).toHaveTextContent('a cluster of 2 nodes')
    const ask = seen.filter((r) => r.url.endsWith('/clusters/check/')).at(-1)!
    expect(await ask.json()).toMatchObject({ name: 'train', size: 2, flavor: 'f2', image: 'img1' })
    fireEvent.click(screen.getByRole('button', { name: 'Launch a cluster of 2' }))
    expect(await screen.findByTestId('elsewhere', {}, LONG)).toBeInTheDocument()
    expect(await seen.filter((r) => r.url.endsWith('/clusters/')).at(-1)!.json()).toMatchObject({ name: 'train', size: 2, queue: false })
  }, 20_000)

  it('says how many of N instances the quota allows and keeps Launch disabled until the count fits', async () => {
    const quota = [{ resource: 'gpus', scope: 'organization', limit: 8, used: 0, requested: 8, exceeded: false }]
    const seen = wizardRoutes({ 'POST /api/v1/instances/check/': () => json({ ...CHECK, quota }) })
    renderPage(<LaunchPage />, { path: '/launch', route: '/launch' })
    await toThirdStep('nb')
    fireEvent.change(await input(/^Count/), { target: { value: '2' } })
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    const over = await screen.findByTestId('count-over-quota', {}, LONG)
    expect(over).toHaveTextContent('The quota allows 1 of these 2 instances')
    expect(over).toHaveTextContent('GPUs (organization): 0 used of 8, and each instance adds 8')
    expect(screen.getByRole('button', { name: 'Launch 2 instances' })).toBeDisabled()
    fireEvent.click(screen.getByRole('button', { name: 'Back' }))
    fireEvent.change(await input(/^Count/), { target: { value: '1' } })
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    const launch = await screen.findByRole('button', { name: 'Launch' }, LONG)
    await waitFor(() => expect(launch).toBeEnabled(), LONG)
    expect(screen.queryByTestId('count-over-quota')).toBeNull()
    expect(seen.filter((r) => r.method === 'POST' && r.url.endsWith('/instances/'))).toHaveLength(0)
  }, 20_000)

  it('launches N instances one by one; a refusal part-way says which were made, and a retry makes only the rest', async () => {
    let refuse = true
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/images/': () => json(page([IMAGE])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([])),
      'GET /api/v1/ib-partitions/': () => json(page([])),
      'GET /api/v1/leases/': () => json(page([])),
      'POST /api/v1/instances/check/': () => json(CHECK),
      'POST /api/v1/instances/': async (request) => {
        const { name } = await request.json()
        if (name === 'nb-2' && refuse) return problem(422, 'quota_exceeded', 'Quota instances of the organization exceeded: 1 in use, limit 1.')
        return accepted(`id-${name}`, name)
      },
    })
    renderPage(<LaunchPage />, { path: '/launch', route: '/launch' })
    await toThirdStep('nb')
    fireEvent.change(await input(/^Count/), { target: { value: '3' } })
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    expect(await screen.findByTestId('count-note', {}, LONG)).toHaveTextContent('The check is for nb-1')
    expect(screen.getByTestId('estimate')).toHaveTextContent('About $71.28 for 24 hours at $2.97 per hour (3 instances)')
    fireEvent.click(screen.getByRole('button', { name: 'Launch 3 instances' }))
    const partial = await screen.findByTestId('partial-launch', {}, LONG)
    expect(partial).toHaveTextContent('1 of 3 instances launched')
    expect(partial).toHaveTextContent('nb-1')
    expect(screen.getByTestId('problem')).toHaveTextContent('Quota instances of the organization exceeded')
    const creates = () => seen.filter((r) => r.method === 'POST' && r.url.endsWith('/api/v1/instances/'))
    expect(creates()).toHaveLength(2)
    refuse = false
    fireEvent.click(screen.getByRole('button', { name: 'Launch 3 instances' }))
    expect(await screen.findByTestId('elsewhere', {}, LONG)).toBeInTheDocument()
    const keys = creates().map((r) => r.headers.get('Idempotency-Key'))
    expect(keys).toHaveLength(5)
    expect(keys[2]).toBe(keys[0])          // nb-1 again: the server replays it
    expect(keys[3]).toBe(keys[1])          // nb-2: refused before, so run anew
    expect(new Set(keys).size).toBe(3)
  }, 20_000)

  it('retries a launch after a reload with the same Idempotency-Key, so a lost answer does not make a second instance', async () => {
    let posts = 0
    const seen = wizardRoutes({
      'POST /api/v1/instances/': () => (++posts === 1 ? problem(503, 'service_unavailable', 'Try again.') : accepted('i1', 'nb')),
    })
    renderPage(<><LaunchPage /><Where /></>, { path: '/launch', route: '/launch' })
    await toThirdStep('nb')
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    const first = await screen.findByRole('button', { name: 'Launch' }, LONG)
    await waitFor(() => expect(first).toBeEnabled(), LONG)
    fireEvent.click(first)
    await waitFor(() => expect(posts).toBe(1), LONG)
    const at = screen.getByTestId('where').textContent!
    cleanup()
    renderPage(<><LaunchPage /><Where /></>, { path: at, route: '/launch' })
    const again = await screen.findByRole('button', { name: 'Launch' }, LONG)
    await waitFor(() => expect(again).toBeEnabled(), LONG)
    fireEvent.click(again)
    expect(await screen.findByTestId('elsewhere', {}, LONG)).toBeInTheDocument()
    const keys = seen.filter((r) => r.method === 'POST' && r.url.endsWith('/instances/')).map((r) => r.headers.get('Idempotency-Key'))
    expect(keys).toHaveLength(2)
    expect(keys[0]).toBeTruthy()
    expect(keys[1]).toBe(keys[0])
    expect(window.sessionStorage.getItem(`${draftKey(PROJECT.id)}.key`)).toBeNull()   // forgotten once launched
  }, 30_000)

  it('says as the name is typed that it cannot be a hostname, and what the greyed-out Next still needs', async () => {
    wizardRoutes()
    renderPage(<LaunchPage />)
    fireEvent.click(await screen.findByLabelText(/h100-mig-3g40/, {}, LONG))
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    expect(await screen.findByTestId('step-needs', {}, LONG)).toHaveTextContent('Needs a name and an image')
    fireEvent.change(await input(/^Name/), { target: { value: 'Bad_Name' } })
    expect(await screen.findByText(/Only lower-case letters, digits and hyphens/)).toBeInTheDocument()
    fireEvent.click(await input(/^Image/))
    fireEvent.click(await screen.findByRole('option', { name: /ubuntu/, hidden: true }, LONG))
    expect(screen.getByTestId('step-needs')).toHaveTextContent('Needs a valid name')
    expect(screen.getByRole('button', { name: 'Next' })).toBeDisabled()
    fireEvent.change(await input(/^Name/), { target: { value: 'good-name' } })
    await waitFor(() => expect(screen.getByRole('button', { name: 'Next' })).toBeEnabled())
    expect(screen.queryByTestId('step-needs')).toBeNull()
  }, 15_000)

  it('names each subnet\'s VPC, since two VPCs may hold subnets of the same name and CIDR', async () => {
    const subnet = (id: string, vpc: string) => ({ id, name: 'app', cidr: '10.0.1.0/24', vpc })
    stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/images/': () => json(page([IMAGE])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([subnet('s1', 'v1'), subnet('s2', 'v2')])),
      'GET /api/v1/vpcs/': () => json(page([{ id: 'v1', name: 'prod' }, { id: 'v2', name: 'staging' }])),
      'POST /api/v1/instances/check/': () => json(CHECK),
    })
    renderPage(<LaunchPage />)
    await toThirdStep('nb')
    fireEvent.click(await input(/^Subnet/))
    expect(await screen.findByRole('option', { name: 'app (10.0.1.0/24) in VPC prod', hidden: true }, LONG)).toBeInTheDocument()
    expect(screen.getByRole('option', { name: 'app (10.0.1.0/24) in VPC staging', hidden: true })).toBeInTheDocument()
  }, 15_000)

  it('keeps the choices across a reload in the middle, and forgets them once launched or cancelled', async () => {
    const seen = wizardRoutes({
      'POST /api/v1/instances/': () => accepted('i1', 'nb'),
    })
    const reload = async () => {
      const at = screen.getByTestId('where').textContent!
      cleanup()
      renderPage(<><LaunchPage /><Where /></>, { path: at, route: '/launch' })
      await screen.findByRole('heading', { name: 'Launch an instance' }, LONG)
    }
    renderPage(<><LaunchPage /><Where /></>, { path: '/launch', route: '/launch' })
    await toThirdStep('nb')
    fireEvent.change(await input(/^Count/), { target: { value: '3' } })
    await waitFor(() => expect(screen.getByTestId('where')).toHaveTextContent('/launch?step=3'))
    await reload()
    expect(screen.getByTestId('where')).toHaveTextContent('/launch?step=3')     // the same step, with the choices
    expect(await input(/^Count/)).toHaveValue('3')
    fireEvent.click(screen.getByRole('button', { name: 'Back' }))
    expect(await input(/^Name/)).toHaveValue('nb')
    expect(await input(/^Image/)).toHaveValue('ubuntu-24-04 (ubuntu 24.04)')
    // the kept image chosen once more stays chosen (a required choice is not unset by choosing it again)
    fireEvent.click(await input(/^Image/))
    fireEvent.click(await screen.findByRole('option', { name: /ubuntu/, hidden: true }, LONG))
    expect(await input(/^Image/)).toHaveValue('ubuntu-24-04 (ubuntu 24.04)')
    expect(screen.getByRole('button', { name: 'Next' })).toBeEnabled()
    fireEvent.click(screen.getByRole('button', { name: 'Back' }))
    expect(await screen.findByLabelText(/h100-mig-3g40/, {}, LONG)).toBeChecked()

    // Cancel forgets them: the wizard opens empty again
    fireEvent.click(screen.getByRole('button', { name: 'Cancel' }))
    expect(await screen.findByTestId('elsewhere')).toBeInTheDocument()    // the instances list
    expect(window.sessionStorage.getItem(draftKey(PROJECT.id))).toBeNull()
    cleanup()
    renderPage(<><LaunchPage /><Where /></>, { path: '/launch', route: '/launch' })
    expect(await screen.findByLabelText(/h100-mig-3g40/, {}, LONG)).not.toBeChecked()

    // so does a launch that succeeded
    await toThirdStep('nb')
    fireEvent.change(await input(/^Count/), { target: { value: '1' } })
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    await reload()
    const launch = await screen.findByRole('button', { name: 'Launch' }, LONG)
    await waitFor(() => expect(launch).toBeEnabled(), LONG)
    fireEvent.click(launch)
    expect(await screen.findByTestId('elsewhere', {}, LONG)).toBeInTheDocument()   // the new instance's page
    expect(await seen.filter((r) => r.method === 'POST' && r.url.endsWith('/instances/')).at(-1)!.json())
      .toMatchObject({ name: 'nb', flavor: 'f2', image: 'img1' })
    expect(window.sessionStorage.getItem(draftKey(PROJECT.id))).toBeNull()
  }, 30_000)
})

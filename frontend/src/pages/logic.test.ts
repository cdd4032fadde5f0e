import { describe, expect, it } from 'vitest'
import type { Flavor, Instance } from '../api/client'
import { gpusInUse } from './Dashboard'
import { pollInterval } from './InstanceDetail'
import { createBody, estimate, gpuModels, type LaunchForm } from './Launch'

const base = { description: '', kind: '', vcpus: 8, memory_mib: 65536, disk_gib: 100, gpu_count: 0, mig_profile: '', vgpu_type: '', share_milli: 0, hugepages: false, visibility: 'public', is_active: true, created_at: '' }
const mig = { ...base, id: 'f-mig', name: 'h100-mig-3g40', gpu_form: 'mig', gpu_model: 'H100', mig_profile: '3g.40gb' } as Flavor
const whole = { ...base, id: 'f-8x', name: 'h100-8x', gpu_form: 'gpu', gpu_model: 'H100', gpu_count: 8 } as Flavor
const cpu = { ...base, id: 'f-cpu', name: 'c8', gpu_form: 'none', gpu_model: '' } as Flavor
const a100 = { ...base, id: 'f-a100', name: 'a100-1x', gpu_form: 'gpu', gpu_model: 'A100', gpu_count: 1 } as Flavor

function vm(flavor: string, status: string): Instance {
  return { id: `${flavor}-${status}`, flavor, status } as unknown as Instance
}

describe('GPUs in use by model', () => {
  it('counts whole GPUs and slices of instances that hold them', () => {
    const flavors = new Map([mig, whole, cpu].map((f) => [f.id, f]))
    const use = gpusInUse([vm('f-8x', 'active'), vm('f-8x', 'provisioning'), vm('f-mig', 'active'), vm('f-mig', 'stopped'), vm('f-cpu', 'active'), vm('f-8x', 'deleted')], flavors)
    expect(use).toEqual([{ model: 'H100', gpus: 16, slices: { 'MIG 3g.40gb': 1 } }])
  })
})

describe('launch wizard', () => {
  it('lists GPU models, then CPU only', () => {
    expect(gpuModels([mig, cpu, a100, whole])).toEqual(['A100', 'H100', 'CPU only'])
  })

  it('sends the subnet and its groups only with a subnet', () => {
    const form: LaunchForm = { gpuModel: 'H100', flavor: 'f-mig', name: ' nb ', image: 'i', sshKeys: ['k'], subnet: null, securityGroups: ['g'], ibPartition: null, market: 'on_demand' }
    expect(createBody(form, 'p')).toEqual({ project: 'p', name: 'nb', flavor: 'f-mig', image: 'i', ssh_keys: ['k'], user_data: '', sla_tier: '', queue: false })
    expect(createBody({ ...form, subnet: 's' }, 'p', true)).toMatchObject({ subnet_id: 's', security_group_ids: ['g'], queue: true })
  })

  it('sends the InfiniBand partition only when one is chosen', () => {
    const form: LaunchForm = { gpuModel: 'H100', flavor: 'f-mig', name: 'nb', image: 'i', sshKeys: [], subnet: null, securityGroups: [], ibPartition: null, market: 'on_demand' }
    expect(createBody(form, 'p')).not.toHaveProperty('ib_partition_id')
    expect(createBody({ ...form, ibPartition: 'ib1' }, 'p')).toMatchObject({ ib_partition_id: 'ib1' })
  })

  it('estimates the cost as hours times the price per hour, and none without both', () => {
    expect(estimate('0.99', 24)).toBe(23.76)
    expect(estimate('19.92', 1.5)).toBe(29.88)
    expect(estimate('0.99', 0)).toBe(0)
    expect(estimate(null, 24)).toBeNull()
    expect(estimate('0.99', '')).toBeNull()
    expect(estimate('0.99', -1)).toBeNull()
  })
})

describe('instance polling', () => {
  it('asks every second while something changes, every two otherwise (a change shows at most ~2 s late)', () => {
    expect(pollInterval({ status: 'provisioning' } as Instance, undefined)).toBe(1000)
    expect(pollInterval({ status: 'active' } as Instance, undefined)).toBe(2000)
    expect(pollInterval({ status: 'active' } as Instance, { status: 'running' } as never)).toBe(1000)
  })
})

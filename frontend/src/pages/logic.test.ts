import { describe, expect, it } from 'vitest'
import type { Flavor, Instance } from '../api/client'
import { gpusInUse } from './Dashboard'
import { pollInterval } from './InstanceDetail'
import { clusterCreateBody, createBody, estimate, gpuModels, instanceNames, requestBody, type LaunchForm } from './Launch'

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
    const form: LaunchForm = { gpuModel: 'H100', flavor: 'f-mig', name: ' nb ', image: 'i', sshKeys: ['k'], subnet: null, securityGroups: ['g'], ibPartition: null, market: 'on_demand', lease: null, shape: 'instances', count: 1 }
    expect(createBody(form, 'p')).toEqual({ project: 'p', name: 'nb', flavor: 'f-mig', image: 'i', ssh_keys: ['k'], user_data: '', sla_tier: '', queue: false })
    expect(createBody({ ...form, subnet: 's' }, 'p', true)).toMatchObject({ subnet_id: 's', security_group_ids: ['g'], queue: true })
  })

  it('sends the InfiniBand partition only when one is chosen', () => {
    const form: LaunchForm = { gpuModel: 'H100', flavor: 'f-mig', name: 'nb', image: 'i', sshKeys: [], subnet: null, securityGroups: [], ibPartition: null, market: 'on_demand', lease: null, shape: 'instances', count: 1 }
    expect(createBody(form, 'p')).not.toHaveProperty('ib_partition_id')
    expect(createBody({ ...form, ibPartition: 'ib1' }, 'p')).toMatchObject({ ib_partition_id: 'ib1' })
  })

  it('names several instances <name>-1 … <name>-N; one instance or a cluster keeps the name', () => {
    const form: LaunchForm = { gpuModel: 'H100', flavor: 'f-mig', name: ' nb ', image: 'i', sshKeys: [], subnet: null, securityGroups: [], ibPartition: null, market: 'on_demand', lease: null, shape: 'instances', count: 1 }
    expect(instanceNames(form)).toEqual(['nb'])
    expect(instanceNames({ ...form, count: 3 })).toEqual(['nb-1', 'nb-2', 'nb-3'])
    expect(instanceNames({ ...form, count: 3, shape: 'cluster' })).toEqual(['nb'])
    expect(createBody({ ...form, count: 3 }, 'p')).toMatchObject({ name: 'nb-1' })
  })

  it('asks for a cluster with its size, and for an instance inside a lease with the lease', () => {
    const form: LaunchForm = { gpuModel: 'H100', flavor: 'f-8x', name: 'train', image: 'i', sshKeys: ['k'], subnet: 's', securityGroups: [], ibPartition: 'ib1', market: 'on_demand', lease: null, shape: 'cluster', count: 2 }
    expect(clusterCreateBody(form, 'p')).toEqual({ project: 'p', name: 'train', flavor: 'f-8x', image: 'i', ssh_keys: ['k'], user_data: '', sla_tier: '', subnet_id: 's', security_group_ids: [], ib_partition_id: 'ib1', size: 2, queue: false })
    const leased = { ...form, shape: 'instances' as const, count: 1, market: 'lease' as const, lease: 'l1' }
    expect(requestBody(leased, 'p', 'train')).toEqual({ project: 'p', name: 'train', flavor: 'f-8x', image: 'i', ssh_keys: ['k'], user_data: '', market: 'lease', lease: 'l1', queue_timeout_s: 0 })
    expect(requestBody({ ...leased, market: 'spot' }, 'p', 'x')).not.toHaveProperty('lease')
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

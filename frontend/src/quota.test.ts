import { describe, expect, it } from 'vitest'
import { quotaAmount, quotaFits, quotaLabel, quotaScope } from './quota'

describe('quota words', () => {
  it('labels the API keys for a person', () => {
    expect(quotaLabel('gpus:H100-SXM5-80GB')).toBe('H100-SXM5-80GB GPUs')
    expect(quotaLabel('gpus')).toBe('GPUs')
    expect(quotaLabel('memory_mib')).toBe('Memory')
    expect(quotaLabel('mig_slices:A100-SXM4-80GB')).toBe('MIG slices (A100-SXM4-80GB)')
    expect(quotaLabel('ib_partitions')).toBe('InfiniBand partitions')
    expect(quotaLabel('something_new')).toBe('something_new')
  })

  it('gives memory and storage their units', () => {
    expect(quotaAmount('memory_mib', 2097152)).toBe('2048 GiB')
    expect(quotaAmount('memory_mib', 1536)).toBe('1.5 GiB')
    expect(quotaAmount('volume_gib:ssd', 500)).toBe('500 GiB')
    expect(quotaAmount('vcpus', 64)).toBe('64')
    expect(quotaScope('project')).toBe('this project')
  })
})

describe('quotaFits', () => {
  const gpus = { resource: 'gpus', scope: 'organization', limit: 8, used: 0, requested: 8, exceeded: false }
  it('counts how many of several identical creates the quota lets through, and the line that stops the rest', () => {
    expect(quotaFits([gpus], 2)).toEqual({ fits: 1, line: gpus })
    expect(quotaFits([gpus], 1)).toBeNull()
    const roomy = { ...gpus, resource: 'instances', limit: 100, requested: 1 }
    expect(quotaFits([roomy, { ...gpus, used: 4, requested: 2 }], 3)).toEqual({ fits: 2, line: { ...gpus, used: 4, requested: 2 } })
  })
  it('leaves a line the check already refuses to the check', () => {
    expect(quotaFits([{ ...gpus, used: 4, exceeded: true }], 3)).toBeNull()
  })
})

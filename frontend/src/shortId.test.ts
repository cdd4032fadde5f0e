import { describe, expect, it } from 'vitest'
import { shortId } from './shortId'

describe('shortId', () => {
  it('keeps the random end of a UUIDv7, not its time prefix shared by objects made together', () => {
    expect(shortId('01a24714-57ff-7a5b-97c7-3a1a4cd7ae94')).toBe('4cd7ae94')
    expect(shortId('01a24714-4200-7a5b-97c7-0000a9d6669f')).toBe('a9d6669f')
    expect(shortId(null)).toBe('')
  })
})

import { screen } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { renderPage, scope } from '../test/render'
import { ConfirmButton } from './ConfirmButton'
import { WriteButton } from './WriteButton'

describe('write actions follow the server’s can_write', () => {
  it('are enabled for a member', () => {
    renderPage(
      <>
        <WriteButton>Add key</WriteButton>
        <ConfirmButton label="Delete" title="t" message="m" onConfirm={() => {}} />
      </>,
    )
    expect(screen.getByRole('button', { name: 'Add key' })).toBeEnabled()
    expect(screen.getByRole('button', { name: 'Delete' })).toBeEnabled()
  })

  it('are disabled, with the reason, for a viewer', () => {
    renderPage(
      <>
        <WriteButton>Add key</WriteButton>
        <ConfirmButton label="Delete" title="t" message="m" onConfirm={() => {}} />
      </>,
      { value: scope({ canWrite: false }) },
    )
    expect(screen.getByRole('button', { name: 'Add key' })).toBeDisabled()
    expect(screen.getByRole('button', { name: 'Add key' })).toHaveAttribute('title', expect.stringContaining('read-only'))
    expect(screen.getByRole('button', { name: 'Delete' })).toBeDisabled()
  })
})

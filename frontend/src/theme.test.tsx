import { NumberInput } from '@mantine/core'
import { fireEvent, screen } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { describe, expect, it } from 'vitest'
import { renderPage } from './test/render'

describe('theme', () => {
  it('never clamps a number input on blur: an out-of-range port stays as typed', async () => {
    renderPage(<NumberInput label="From port" min={1} max={65535} />)
    const input = screen.getByLabelText('From port')
    await userEvent.type(input, '70000')
    fireEvent.blur(input)
    expect(input).toHaveValue('70000')
  })
})

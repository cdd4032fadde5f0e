import { afterEach, describe, expect, it } from 'vitest'
import { keepFocusNear } from './keepFocusNear'

function setup() {
  document.body.innerHTML = `<main><table aria-label="SSH keys"><tbody>
    <tr id="r1"><td><button id="b1">Delete</button></td></tr>
    <tr id="r2"><td><button id="b2">Delete</button></td></tr></tbody></table><button id="other">Other</button></main>`
  return {
    table: document.querySelector('table')!,
    button: document.getElementById('b1') as HTMLButtonElement,
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0))

afterEach(() => {
  document.body.innerHTML = ''
})

describe('keepFocusNear', () => {
  it('puts the focus on the table when the focused button goes with its row', async () => {
    const { table, button } = setup()
    button.focus()
    keepFocusNear(button)
    document.getElementById('r1')!.remove()
    await settle()
    expect(document.activeElement).toBe(table)
    expect(table.getAttribute('tabindex')).toBe('-1')
  })

  it('parks the focus on the table while the button is disabled and gives it back when it is usable again', async () => {
    const { table, button } = setup()
    button.focus()
    keepFocusNear(button)
    button.blur() // what the browser does to a focused control that gets disabled (jsdom does not)
    button.disabled = true
    await settle()
    expect(document.activeElement).toBe(table)
    button.disabled = false
    await settle()
    expect(document.activeElement).toBe(button)
  })

  it('moves on to the main region when the table goes too (the list is empty now)', async () => {
    const { table, button } = setup()
    button.focus()
    keepFocusNear(button)
    document.getElementById('r1')!.remove()
    await settle()
    expect(document.activeElement).toBe(table)
    table.remove()
    await settle()
    expect(document.activeElement).toBe(document.querySelector('main'))
  })

  it('leaves the focus alone once the person moved it elsewhere', async () => {
    const { button } = setup()
    button.focus()
    keepFocusNear(button)
    const other = document.getElementById('other')!
    other.focus()
    document.getElementById('r1')!.remove()
    await settle()
    expect(document.activeElement).toBe(other)
  })
})

"""A corpus of generated pages with exact truth, to measure the CPU engine against its peers (bench/cpu_peers.py).

Deterministic from a seed: the same seed gives the same pages, byte for byte. Each page is one of the 11 languages
the service claims, in one of 13 Latin fonts (serif, sans, mono, condensed: DejaVu, Liberation, Noto, FreeFont) or
2 CJK ones (Noto Sans/Serif CJK), 8-14 pt at 150-300 dpi, line spacing 1.0-1.6, laid out as prose in one to three
columns, a table, or a list under a heading; some are turned 90/180/270 degrees or tilted by up to 3 degrees, and
some degraded as a scan degrades them (blur, noise, JPEG, low contrast, uneven light, bleed-through of the back
page: numpy and OpenCV, below). The real scans with a transcription (tests/samples/linn.png) are added as they are.

The truth is the page's text in reading order: columns top to bottom, left column first; tables row by row.
A page is about a half sheet (5.5 x 4-5 in), so that ~300 pages read in minutes on two cores.

Fonts are Debian's: apt-get install fonts-dejavu-core fonts-liberation fonts-noto-core fonts-noto-cjk
fonts-freefont-ttf

    .venv/bin/python bench/cpu_corpus.py --out /tmp/corpus [--seed 35] [--pages 308]

writes page PNGs, their truth (.txt) and index.json ({"pages": [{"name", "lang", "layout", "font", ...}]}).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests" / "samples"
TTF = Path("/usr/share/fonts/truetype")
OTF = Path("/usr/share/fonts/opentype/noto")

LATIN_FONTS = {
    "dejavu-serif": TTF / "dejavu/DejaVuSerif.ttf",
    "dejavu-sans": TTF / "dejavu/DejaVuSans.ttf",
    "dejavu-mono": TTF / "dejavu/DejaVuSansMono.ttf",
    "dejavu-condensed": TTF / "dejavu/DejaVuSansCondensed.ttf",
    "liberation-serif": TTF / "liberation/LiberationSerif-Regular.ttf",
    "liberation-sans": TTF / "liberation/LiberationSans-Regular.ttf",
    "liberation-mono": TTF / "liberation/LiberationMono-Regular.ttf",
    "liberation-narrow": TTF / "liberation/LiberationSansNarrow-Regular.ttf",
    "noto-serif": TTF / "noto/NotoSerif-Regular.ttf",
    "noto-sans": TTF / "noto/NotoSans-Regular.ttf",
    "free-serif": TTF / "freefont/FreeSerif.ttf",
    "free-sans": TTF / "freefont/FreeSans.ttf",
    "free-mono": TTF / "freefont/FreeMono.ttf",
}
# Face index in the collection: 0 Japanese, 2 Simplified Chinese.
CJK_FONTS = {"noto-sans-cjk": OTF / "NotoSansCJK-Regular.ttc", "noto-serif-cjk": OTF / "NotoSerifCJK-Regular.ttc"}
CJK_FACE = {"ja": 0, "zh": 2}

# Sentences of ordinary business and administrative prose; numbers are filled in per page.
TEXT = {
    "en": ["The invoice for order {n} is due within thirty days of delivery.",
           "Please send the signed contract back to our office before {d}.",
           "All prices are quoted in euros and include shipping to the main warehouse.",
           "The committee approved the budget of {a} for the next financial year.",
           "Our support team answers every request within two working days.",
           "A copy of this letter has been sent to the legal department.",
           "The meeting on the annual report was moved to room {n} on the third floor.",
           "Payment by bank transfer must quote the reference number shown above.",
           "Damaged goods should be reported in writing within seven days.",
           "The tenant agrees to keep the premises clean and in good repair."],
    "fr": ["La facture de la commande {n} est payable sous trente jours.",
           "Veuillez nous retourner le contrat signé avant le {d}.",
           "Les prix sont indiqués en euros et comprennent la livraison à l'entrepôt.",
           "Le comité a approuvé un budget de {a} pour l'année prochaine.",
           "Notre équipe répond à chaque demande en deux jours ouvrés.",
           "Une copie de cette lettre a été envoyée au service juridique.",
           "La réunion sur le rapport annuel aura lieu dans la salle {n}.",
           "Tout paiement par virement doit indiquer la référence ci-dessus.",
           "Les marchandises endommagées doivent être signalées par écrit.",
           "Le locataire s'engage à maintenir les lieux propres et en bon état."],
    "de": ["Die Rechnung für Auftrag {n} ist innerhalb von dreißig Tagen fällig.",
           "Bitte senden Sie den unterschriebenen Vertrag bis zum {d} zurück.",
           "Alle Preise verstehen sich in Euro einschließlich Lieferung ins Lager.",
           "Der Ausschuss hat ein Budget von {a} für das nächste Jahr genehmigt.",
           "Unser Kundendienst beantwortet jede Anfrage binnen zwei Werktagen.",
           "Eine Kopie dieses Schreibens wurde an die Rechtsabteilung geschickt.",
           "Die Sitzung über den Jahresbericht findet in Raum {n} statt.",
           "Bei Überweisung ist die oben genannte Referenznummer anzugeben.",
           "Beschädigte Waren müssen innerhalb von sieben Tagen gemeldet werden.",
           "Der Mieter verpflichtet sich, die Räume sauber und instand zu halten."],
    "es": ["La factura del pedido {n} vence a los treinta días de la entrega.",
           "Le rogamos devuelva el contrato firmado antes del {d}.",
           "Todos los precios están en euros e incluyen el envío al almacén.",
           "El comité aprobó un presupuesto de {a} para el próximo año.",
           "Nuestro equipo responde a cada solicitud en dos días hábiles.",
           "Se ha enviado una copia de esta carta al departamento jurídico.",
           "La reunión sobre el informe anual será en la sala {n}.",
           "El pago por transferencia debe indicar el número de referencia.",
           "Los productos dañados deben comunicarse por escrito en siete días.",
           "El inquilino se compromete a mantener el local limpio y en buen estado."],
    "it": ["La fattura dell'ordine {n} è pagabile entro trenta giorni.",
           "Si prega di restituire il contratto firmato entro il {d}.",
           "Tutti i prezzi sono in euro e comprendono la consegna al magazzino.",
           "Il comitato ha approvato un bilancio di {a} per il prossimo anno.",
           "Il nostro servizio clienti risponde a ogni richiesta in due giorni.",
           "Una copia di questa lettera è stata inviata all'ufficio legale.",
           "La riunione sulla relazione annuale si terrà nella sala {n}.",
           "Il pagamento con bonifico deve indicare il numero di riferimento.",
           "La merce danneggiata va segnalata per iscritto entro sette giorni.",
           "L'inquilino si impegna a mantenere i locali puliti e in buono stato."],
    "nl": ["De factuur voor bestelling {n} moet binnen dertig dagen worden betaald.",
           "Stuur het ondertekende contract vóór {d} terug naar ons kantoor.",
           "Alle prijzen zijn in euro en inclusief levering aan het magazijn.",
           "De commissie heeft een begroting van {a} voor volgend jaar goedgekeurd.",
           "Onze klantenservice beantwoordt elke vraag binnen twee werkdagen.",
           "Een kopie van deze brief is naar de juridische afdeling gestuurd.",
           "De vergadering over het jaarverslag is verplaatst naar zaal {n}.",
           "Bij betaling per overschrijving het referentienummer vermelden.",
           "Beschadigde goederen moeten binnen zeven dagen schriftelijk worden gemeld.",
           "De huurder zorgt ervoor dat de ruimte schoon en in goede staat blijft."],
    "pt": ["A fatura da encomenda {n} vence trinta dias após a entrega.",
           "Por favor devolva o contrato assinado até {d}.",
           "Todos os preços estão em euros e incluem o transporte até ao armazém.",
           "A comissão aprovou um orçamento de {a} para o próximo ano.",
           "A nossa equipa responde a cada pedido em dois dias úteis.",
           "Foi enviada uma cópia desta carta ao departamento jurídico.",
           "A reunião sobre o relatório anual será na sala {n}.",
           "O pagamento por transferência deve indicar a referência acima.",
           "As mercadorias danificadas devem ser comunicadas por escrito.",
           "O inquilino compromete-se a manter o espaço limpo e em bom estado."],
    "sv": ["Fakturan för order {n} ska betalas inom trettio dagar efter leverans.",
           "Var vänlig skicka tillbaka det undertecknade avtalet före {d}.",
           "Alla priser anges i euro och inkluderar frakt till lagret.",
           "Kommittén godkände en budget på {a} för nästa år.",
           "Vår kundtjänst svarar på varje fråga inom två arbetsdagar.",
           "En kopia av detta brev har skickats till juridiska avdelningen.",
           "Mötet om årsredovisningen hålls i rum {n} på tredje våningen.",
           "Vid betalning via bankgiro ska referensnumret ovan anges.",
           "Skadade varor ska anmälas skriftligen inom sju dagar.",
           "Hyresgästen förbinder sig att hålla lokalen ren och i gott skick."],
    "da": ["Fakturaen for ordre {n} forfalder til betaling inden for tredive dage.",
           "Send venligst den underskrevne kontrakt tilbage før {d}.",
           "Alle priser er i euro og omfatter levering til lageret.",
           "Udvalget godkendte et budget på {a} for det kommende år.",
           "Vores kundeservice besvarer enhver henvendelse inden for to hverdage.",
           "En kopi af dette brev er sendt til den juridiske afdeling.",
           "Mødet om årsrapporten er flyttet til lokale {n} på tredje sal.",
           "Ved betaling via bankoverførsel skal referencenummeret angives.",
           "Beskadigede varer skal anmeldes skriftligt inden for syv dage.",
           "Lejeren forpligter sig til at holde lokalerne rene og i god stand."],
    "zh": ["订单{n}的发票应在交货后三十天内付款。",
           "请在{d}之前将签好的合同寄回我们的办公室。",
           "所有价格均以欧元计算，并包括运往主仓库的运费。",
           "委员会批准了下一财政年度{a}的预算。",
           "我们的客服团队会在两个工作日内答复每一项请求。",
           "本函副本已抄送法律部门。",
           "年度报告会议改在三楼{n}号会议室举行。",
           "银行转账付款时请注明上面所示的参考编号。",
           "货物如有损坏，请在七天内以书面形式报告。",
           "承租人同意保持房屋清洁并维修良好。"],
    "ja": ["注文{n}の請求書は納品後三十日以内にお支払いください。",
           "署名済みの契約書を{d}までに当社へご返送ください。",
           "価格はすべてユーロ建てで、倉庫までの送料を含みます。",
           "委員会は来年度の予算として{a}を承認しました。",
           "サポートチームはすべてのお問い合わせに二営業日以内に回答します。",
           "この書簡の写しを法務部に送付しました。",
           "年次報告書の会議は三階の{n}号室に変更されました。",
           "銀行振込の際は上記の参照番号をご記入ください。",
           "破損した商品は七日以内に書面でご連絡ください。",
           "賃借人は建物を清潔に保ち、良好な状態を維持することに同意します。"],
}
HEADINGS = {
    "en": ["Terms of payment", "Annual report", "Delivery note", "Notice to tenants"],
    "fr": ["Conditions de paiement", "Rapport annuel", "Bon de livraison", "Avis aux locataires"],
    "de": ["Zahlungsbedingungen", "Jahresbericht", "Lieferschein", "Hinweis für Mieter"],
    "es": ["Condiciones de pago", "Informe anual", "Albarán de entrega", "Aviso a los inquilinos"],
    "it": ["Condizioni di pagamento", "Relazione annuale", "Bolla di consegna", "Avviso agli inquilini"],
    "nl": ["Betalingsvoorwaarden", "Jaarverslag", "Leveringsbon", "Bericht aan huurders"],
    "pt": ["Condições de pagamento", "Relatório anual", "Guia de remessa", "Aviso aos inquilinos"],
    "sv": ["Betalningsvillkor", "Årsredovisning", "Följesedel", "Meddelande till hyresgäster"],
    "da": ["Betalingsbetingelser", "Årsrapport", "Følgeseddel", "Meddelelse til lejere"],
    "zh": ["付款条件", "年度报告", "送货单", "租户通知"],
    "ja": ["支払条件", "年次報告書", "納品書", "入居者へのお知らせ"],
}
TABLE_HEAD = {
    "en": ["Item", "Quantity", "Price", "Total"], "fr": ["Article", "Quantité", "Prix", "Total"],
    "de": ["Artikel", "Menge", "Preis", "Summe"], "es": ["Artículo", "Cantidad", "Precio", "Total"],
    "it": ["Articolo", "Quantità", "Prezzo", "Totale"], "nl": ["Artikel", "Aantal", "Prijs", "Totaal"],
    "pt": ["Artigo", "Quantidade", "Preço", "Total"], "sv": ["Artikel", "Antal", "Pris", "Summa"],
    "da": ["Vare", "Antal", "Pris", "I alt"], "zh": ["项目", "数量", "单价", "合计"],
    "ja": ["品目", "数量", "単価", "合計"],
}
LANGS = list(TEXT)
CJK = {"zh", "ja"}
LAYOUTS = ("prose", "prose", "columns", "table", "list")
DPIS = (150, 200, 250, 300)
WIDTH_IN, HEIGHT_IN, MARGIN_IN = 5.5, 4.6, 0.35


@dataclass
class PageSpec:
    name: str
    lang: str
    layout: str
    font: str
    points: int
    dpi: int
    spacing: float
    columns: int
    turn: int  # degrees counter-clockwise the page was turned (its reader must turn it back)
    tilt: float
    degraded: list[str]
    group: str = "generated"


def _font(spec: PageSpec, size_px: int) -> ImageFont.FreeTypeFont:
    if spec.lang in CJK:
        return ImageFont.truetype(str(CJK_FONTS[spec.font]), size_px, index=CJK_FACE[spec.lang])
    return ImageFont.truetype(str(LATIN_FONTS[spec.font]), size_px)


def _fill(rng: random.Random, sentence: str) -> str:
    return sentence.format(n=rng.randint(100, 9999), d=f"{rng.randint(1, 28):02d}.{rng.randint(1, 12):02d}.2026",
                           a=f"{rng.randint(10, 990)} {rng.randint(0, 999):03d} EUR")


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: int, cjk: bool) -> list[str]:
    """Greedy wrapping at spaces (at any character for Chinese and Japanese); no hyphenation."""
    units = list(text) if cjk else text.split(" ")
    joiner = "" if cjk else " "
    lines, line = [], ""
    for unit in units:
        candidate = f"{line}{joiner}{unit}" if line else unit
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = unit
        else:
            line = candidate
    return lines + [line] if line else lines


def _paragraphs(rng: random.Random, lang: str, count: int) -> list[str]:
    return [(" " if lang not in CJK else "").join(_fill(rng, rng.choice(TEXT[lang])) for _ in range(rng.randint(2, 4)))
            for _ in range(count)]


def render(spec: PageSpec, rng: random.Random) -> tuple[Image.Image, str]:
    """The upright clean page and its truth."""
    px = round(spec.points * spec.dpi / 72)
    font, bold = _font(spec, px), _font(spec, round(px * 1.35))
    width, height, margin = (round(v * spec.dpi) for v in (WIDTH_IN, HEIGHT_IN, MARGIN_IN))
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    pitch = round(px * spec.spacing * 1.15)  # the font's own line height is about 1.15 em
    cjk = spec.lang in CJK
    truth: list[str] = []
    y = margin
    heading = rng.choice(HEADINGS[spec.lang])
    draw.text((margin, y), heading, font=bold, fill=0)
    truth.append(heading)
    y += round(px * 1.35 * 1.6)
    bottom = height - margin
    if spec.layout in ("prose", "columns"):
        gap = round(0.25 * spec.dpi)
        col_width = (width - 2 * margin - gap * (spec.columns - 1)) // spec.columns
        for column in range(spec.columns):
            x, cy = margin + column * (col_width + gap), y
            for paragraph in _paragraphs(rng, spec.lang, 6):
                lines = _wrap(paragraph, font, col_width, cjk)
                room = (bottom - cy) // pitch
                if room < 1:
                    break
                lines = lines[:room]
                for line in lines:
                    draw.text((x, cy), line, font=font, fill=0)
                    cy += pitch
                truth.extend(lines)
                cy += round(pitch * 0.6)
    elif spec.layout == "list":
        for number in range(1, 20):
            item = _wrap(f"{number}. " + _fill(rng, rng.choice(TEXT[spec.lang])), font, width - 2 * margin, cjk)
            if y + pitch * len(item) > bottom:
                break
            for line in item:
                draw.text((margin, y), line, font=font, fill=0)
                y += pitch
            truth.extend(item)
            y += round(pitch * 0.3)
    else:
        head = TABLE_HEAD[spec.lang]
        cell_w = (width - 2 * margin) // len(head)
        row_h = round(pitch * 1.3)
        plain = [re.sub(r"\{\w\}", "", s) for s in TEXT[spec.lang]]
        words = [w for s in plain for w in (s.split(" ") if not cjk else [s[:3], s[3:6]]) if w.strip(".,")]
        rows = [head]
        while y + row_h * (len(rows) + 1) <= bottom and len(rows) < 12:
            quantity, price = rng.randint(1, 250), rng.randint(100, 99999)
            rows.append([rng.choice(words).strip(".,"), str(quantity), f"{price / 100:.2f}",
                         f"{quantity * price / 100:.2f}"])
        ruled = rng.random() < 0.5
        for r, row in enumerate(rows):
            for c, cell in enumerate(row):
                cell_font = bold if r == 0 and not cjk else font
                while cell_font.getlength(cell) > cell_w - px and len(cell) > 2:
                    cell = cell[:-1]
                row[c] = cell
                draw.text((margin + c * cell_w + px // 3, y + (row_h - px) // 2), cell, font=cell_font, fill=0)
            if ruled:
                draw.line((margin, y, width - margin, y), fill=0, width=max(1, px // 12))
            y += row_h
            truth.append(" ".join(row))
        if ruled:
            draw.line((margin, y, width - margin, y), fill=0, width=max(1, px // 12))
    return page.convert("RGB"), "\n".join(truth)


def degrade(image: Image.Image, kinds: list[str], rng: random.Random, back: Image.Image | None) -> Image.Image:
    """A scan's faults, in the order a scanner adds them."""
    array = np.asarray(image.convert("L"), dtype=np.float32)
    h, w = array.shape
    if "bleed" in kinds and back is not None:
        mirrored = np.asarray(back.convert("L").resize((w, h)).transpose(Image.FLIP_LEFT_RIGHT), dtype=np.float32)
        array = np.minimum(array, 255 - (255 - mirrored) * rng.uniform(0.12, 0.25))
    if "light" in kinds:
        ys, xs = np.mgrid[0:h, 0:w]
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        shade = 1 - rng.uniform(0.25, 0.45) * np.hypot(xs - cx, ys - cy) / np.hypot(w, h)
        array = array * shade
    if "contrast" in kinds:
        low, high = rng.uniform(70, 110), rng.uniform(190, 225)
        array = low + array * (high - low) / 255
    if "blur" in kinds:
        array = cv2.GaussianBlur(array, (0, 0), rng.uniform(0.6, 1.1))
    if "noise" in kinds:
        array = array + np.random.default_rng(rng.randint(0, 2**31)).normal(0, rng.uniform(6, 14), array.shape)
    out = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8)).convert("RGB")
    if "jpeg" in kinds:
        buffer = io.BytesIO()
        out.save(buffer, "JPEG", quality=rng.randint(25, 50))
        out = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    return out


def make_spec(n: int, rng: random.Random) -> PageSpec:
    lang = LANGS[n % len(LANGS)]
    layout = rng.choice(LAYOUTS)
    font = rng.choice(sorted(CJK_FONTS if lang in CJK else LATIN_FONTS))
    turn = rng.choices((0, 90, 180, 270), weights=(76, 8, 8, 8))[0]
    tilt = round(rng.uniform(-3, 3), 2) if turn == 0 and rng.random() < 0.2 else 0.0
    degraded = sorted(rng.sample(["blur", "noise", "jpeg", "contrast", "light", "bleed"], rng.randint(1, 3))
                      ) if rng.random() < 0.4 else []
    return PageSpec(name=f"p{n:03d}-{lang}", lang=lang, layout=layout, font=font, points=rng.randint(8, 14),
                    dpi=rng.choice(DPIS), spacing=round(rng.uniform(1.0, 1.6), 2),
                    columns=rng.randint(2, 3) if layout == "columns" else 1, turn=turn, tilt=tilt,
                    degraded=degraded)


def generate(out: Path, *, seed: int = 35, pages: int = 308) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    index, previous = [], None
    for n in range(pages):
        rng = random.Random(f"{seed}:{n}")
        spec = make_spec(n, rng)
        image, truth = render(spec, rng)
        clean = image
        if spec.tilt:
            image = image.rotate(spec.tilt, resample=Image.BICUBIC, expand=True, fillcolor="white")
        if spec.turn:
            image = image.rotate(spec.turn, expand=True)
        if spec.degraded:
            image = degrade(image, spec.degraded, rng, previous)
        previous = clean
        image.save(out / f"{spec.name}.png")
        (out / f"{spec.name}.txt").write_text(truth + "\n", encoding="utf-8")
        index.append(asdict(spec))
    for scan in ("linn",):
        Image.open(SAMPLES / f"{scan}.png").convert("RGB").save(out / f"{scan}.png")
        (out / f"{scan}.txt").write_text((SAMPLES / f"{scan}.txt").read_text(encoding="utf-8"), encoding="utf-8")
        index.append({"name": scan, "lang": "en", "layout": "scan", "font": "scan", "points": 0, "dpi": 0,
                      "spacing": 0, "columns": 1, "turn": 0, "tilt": 0, "degraded": ["scan"], "group": "real scan"})
    (out / "index.json").write_text(json.dumps({"seed": seed, "pages": index}, indent=1), encoding="utf-8")
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--pages", type=int, default=308, help="generated pages (28 per language at 308)")
    args = parser.parse_args()
    index = generate(args.out, seed=args.seed, pages=args.pages)
    print(f"{len(index)} pages in {args.out}")


if __name__ == "__main__":
    main()

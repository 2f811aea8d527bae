"""Fixed word lists and a Zipf-like sampler: the raw material of the synthetic corpus.

Everything here is deterministic: the lists are literals, synthetic words come from a seeded
`random.Random`, and ranks are list positions (never set or dict iteration order), so the same
seed gives the same vocabulary on every machine and Python version.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Final


def _words(block: str) -> tuple[str, ...]:
    """The whitespace-separated words of a literal block, in order."""
    return tuple(block.split())


# English, most frequent first: function words, then technical prose words.
ENGLISH_FUNCTION: Final = _words(
    """
the of and to a in is that for it as with be on not by this are or from at which an
can if will all when we you they their there more one also has been should each into
but only other than then so may must after before about over under between without
"""
)

ENGLISH_CONTENT: Final = _words(
    """
data system file user service request server client query index source version release
update change record claim evidence segment generation hash value field table column row
config configuration option setting default path folder directory workspace project team
process task job worker queue event message log error warning status result report check
test build deploy pipeline cache store database schema migration backup restore network
latency throughput memory disk storage limit timeout retry attempt policy rule access token
account payment invoice refund customer order product price contract review audit owner
document page section heading paragraph list link note draft summary answer question search
time day week month year hour minute second window period interval cycle stage phase step
first last next new old current previous final initial stable legacy internal external
public private shared local remote manual automatic daily weekly monthly regular critical
read write run start stop create delete remove add keep send receive handle return verify
load parse split merge sort filter match count measure compare replace rename move copy
support require allow prevent ensure track monitor notify schedule approve reject archive
large small fast slow simple complex valid invalid exact partial empty full single multiple
node cluster region zone host port endpoint route proxy gateway certificate key secret role
metric alert dashboard incident outage runbook escalation rotation oncall handover ticket
feature flag experiment rollout rollback canary traffic load balancer instance container
image volume snapshot replica shard partition leader follower primary secondary standby
vendor partner supplier budget forecast estimate quarter target goal milestone roadmap plan
meeting decision proposal discussion agreement exception approval request deadline priority
security privacy compliance encryption signature identity permission group member admin
"""
)

# Syllables for synthetic words: the long, rare tail of a real vocabulary (names, jargon).
_ONSETS: Final = _words("b c d f g h j k l m n p r s t v w z br cr dr fl gr kl pr st tr sh ch th")
_NUCLEI: Final = _words("a e i o u ai ea io ou")
_CODAS: Final = ["", "", "n", "r", "s", "l", "x", "t", "m", "nd", "rk", "st"]

RUSSIAN_FUNCTION: Final = _words(
    """
и в не на что с по для это как при из к о от до все так его но же если или только уже
"""
)

RUSSIAN_CONTENT: Final = _words(
    """
данные система файл пользователь сервис запрос сервер клиент индекс источник версия выпуск
обновление изменение запись утверждение документ раздел заголовок абзац список ссылка заметка
настройка параметр каталог проект команда процесс задача очередь событие сообщение журнал
ошибка предупреждение статус результат отчёт проверка тест сборка развёртывание хранилище
база схема миграция копия сеть задержка память диск лимит таймаут повтор попытка политика
правило доступ токен счёт платёж возврат клиента заказ продукт цена договор аудит владелец
страница поиск ответ вопрос время день неделя месяц год час минута период этап шаг первый
последний новый старый текущий предыдущий стабильный внутренний внешний общий локальный
удалённый ручной автоматический ежедневный важный читать писать запускать создавать удалять
добавлять хранить отправлять получать обрабатывать проверять загружать сравнивать копировать
поддерживать требовать разрешать обеспечивать отслеживать уведомлять утверждать архивировать
большой малый быстрый медленный простой сложный точный пустой полный узел кластер регион
"""
)

CHINESE_WORDS: Final = _words(
    """
系统 数据 用户 配置 文件 服务 版本 更新 安装 运行 测试 问题 需要 可以 使用 支持 我们 这个
一个 没有 已经 进行 通过 如果 因为 所以 但是 以及 或者 其中 目前 主要 重要 相关 功能 方法
请求 服务器 客户端 查询 索引 来源 记录 证据 段落 标题 列表 链接 笔记 草稿 摘要 答案 搜索
时间 每天 每周 每月 小时 分钟 周期 阶段 步骤 第一 最后 下一个 新的 旧的 当前 之前 稳定
内部 外部 公共 私有 共享 本地 远程 手动 自动 读取 写入 启动 停止 创建 删除 添加 保存 发送
接收 处理 返回 验证 加载 解析 合并 排序 过滤 匹配 统计 比较 替换 移动 复制 要求 允许 防止
确保 跟踪 监控 通知 计划 批准 拒绝 归档 团队 项目 流程 任务 队列 事件 消息 日志 错误 警告
状态 结果 报告 检查 构建 部署 缓存 存储 数据库 迁移 备份 恢复 网络 延迟 内存 磁盘 限制
超时 重试 策略 规则 权限 令牌 账户 支付 发票 退款 客户 订单 产品 价格 合同 审计 负责人
"""
)
CHINESE_FILLERS: Final = ["的", "了", "在", "和", "是", "也", "都", "将", "被", "对"]

JAPANESE_NOUNS: Final = _words(
    """
システム データ ユーザー 設定 ファイル サービス バージョン 更新 インストール 実行 テスト
問題 機能 方法 リクエスト サーバー クライアント 検索 索引 記録 証拠 段落 見出し 一覧 リンク
メモ 下書き 要約 回答 時間 毎日 毎週 毎月 手順 段階 最初 最後 現在 以前 内部 外部 共有
ローカル リモート 手動 自動 読み込み 書き込み 起動 停止 作成 削除 追加 保存 送信 受信
処理 検証 解析 統合 並べ替え 比較 置換 移動 複製 要件 権限 監視 通知 計画 承認 拒否
チーム プロジェクト 工程 タスク キュー イベント メッセージ ログ エラー 警告 状態 結果
報告 確認 構築 展開 キャッシュ ストレージ データベース 移行 バックアップ 復元 ネットワーク
遅延 メモリ ディスク 制限 再試行 方針 規則 アカウント 支払い 請求書 返金 顧客 注文 製品
価格 契約 監査 担当者 文書 手続き 運用 障害 対応 環境 本番 開発 品質 性能 安全 仕様
"""
)
JAPANESE_PARTICLES: Final = ["は", "が", "を", "に", "で", "の", "と", "から", "まで", "へ"]
JAPANESE_ENDINGS: Final = [
    "します",
    "できます",
    "されます",
    "必要です",
    "あります",
    "します",
    "しました",
    "してください",
    "推奨します",
    "確認します",
]


def synthetic_words(count: int, seed: int) -> list[str]:
    """`count` distinct pronounceable words, made from syllables by a seeded generator."""
    rng = random.Random(f"synthetic:{seed}")
    seen: set[str] = set(ENGLISH_FUNCTION) | set(ENGLISH_CONTENT)
    out: list[str] = []
    for attempt in itertools.count():
        if len(out) >= count:
            break
        syllables = rng.choice((2, 2, 3, 3, 4)) if attempt < count * 50 else 5
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS) for _ in range(syllables)
        )
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


class Zipf:
    """Draws words with probability proportional to 1 / rank**exponent (rank 1 = first)."""

    def __init__(self, words: Sequence[str], exponent: float = 1.05) -> None:
        if not words:
            raise ValueError("a Zipf sampler needs at least one word")
        self.words: tuple[str, ...] = tuple(words)
        self._cum = list(
            itertools.accumulate(1.0 / (r**exponent) for r in range(1, len(words) + 1))
        )

    def draw(self, rng: random.Random, k: int = 1) -> list[str]:
        return rng.choices(self.words, cum_weights=self._cum, k=k)

    def one(self, rng: random.Random) -> str:
        return rng.choices(self.words, cum_weights=self._cum, k=1)[0]


def english(seed: int, synthetic: int = 4000) -> Zipf:
    """Function words first, technical words next, synthetic jargon as the long tail."""
    return Zipf([*ENGLISH_FUNCTION, *ENGLISH_CONTENT, *synthetic_words(synthetic, seed)])


def russian() -> Zipf:
    return Zipf([*RUSSIAN_FUNCTION, *RUSSIAN_CONTENT])


def chinese() -> Zipf:
    return Zipf(CHINESE_WORDS, exponent=0.75)


def japanese() -> Zipf:
    return Zipf(JAPANESE_NOUNS, exponent=0.75)
